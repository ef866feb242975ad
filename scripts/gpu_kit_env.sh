# shellcheck shell=bash
# env.sh of the kit scripts/gpu_kit.sh builds (copied there): `source kit/env.sh` sets up a
# shell on a machine without Open MPI, OpenBLAS & co. to run the kit's programs and tests.
# The kit's libraries and Open MPI's launcher, plugins and help files (OPAL_PREFIX; PMIx ignores
# its prefix for plugins, hence its component path), a one-node launch without ssh or rsh
# (plm isolated), root allowed; the CUDA libraries from PyTorch's pip wheels where present
# (PT_TORCH_VENV, default /opt/torch/.venv); the CTest files rewritten for where the kit lies.
pt_kit=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PT_KIT=$pt_kit
export PATH=$pt_kit/ompi/bin:$PATH
pt_kit_libs=$pt_kit/lib
for d in "${PT_TORCH_VENV:-/opt/torch/.venv}"/lib/python3*/site-packages/nvidia/*/lib; do
  [[ -d $d ]] && pt_kit_libs=$pt_kit_libs:$d
done
export LD_LIBRARY_PATH=$pt_kit_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
unset pt_kit_libs
export OPAL_PREFIX=$pt_kit/ompi
export OMPI_MCA_plm=isolated
export OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_pml=ob1
# containers often forbid the cross-process reads (CMA) of the shared-memory transport
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_mca_base_component_show_load_errors=0
export PMIX_MCA_mca_base_component_path=$pt_kit/pmix
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bash "$pt_kit/relocate.sh"
