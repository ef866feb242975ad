/* CPU placement (device/placement.c) on synthetic hwloc topologies and on an XML topology with
 * GPUs: the spread over NUMA nodes and cores, GPU nearness and its fallbacks, the keep/replace
 * decisions for an existing binding, the launcher detection, the ranks-per-GPU rule, and one
 * real binding of this process. Expected sets are written out by hand for the small cases; a
 * property check (disjoint, whole contiguous cores, one NUMA node each, all cores used) runs
 * over every rank count on a 2 x 8-core machine. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "device/placement.h"
#include "test_util.h"

static hwloc_topology_t synthetic(const char *desc) {
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) < 0 || hwloc_topology_set_synthetic(t, desc) < 0 ||
      hwloc_topology_load(t) < 0) {
    fprintf(stderr, "test_placement: cannot load synthetic topology '%s'\n", desc);
    exit(1);
  }
  return t;
}

/* XML building blocks: an object's opening tag (end: ">" or "/>" plus any attributes), a
 * closing tag, and a GPU behind its own PCI bridge. */
static void xml(char *x, size_t sz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void xml(char *x, size_t sz, const char *fmt, ...) {
  size_t n = strlen(x);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(x + n, sz - n, fmt, ap);
  va_end(ap);
}

static void xml_obj(char *x, size_t sz, const char *type, int os, unsigned cpus, unsigned node,
                    const char *end) {
  xml(x, sz, "<object type=\"%s\" os_index=\"%d\" cpuset=\"0x%02x\" complete_cpuset=\"0x%02x\" "
      "nodeset=\"0x%x\" complete_nodeset=\"0x%x\"%s\n", type, os, cpus, cpus, node, node, end);
}

static void xml_gpu(char *x, size_t sz, int bus) {
  xml(x, sz, "<object type=\"Bridge\" bridge_type=\"0-1\" depth=\"0\" "
      "bridge_pci=\"0000:[%02x-%02x]\">\n<object type=\"PCIDev\" pci_busid=\"0000:%02x:00.0\" "
      "pci_type=\"0302 [10de:20b0] [10de:1450] a1\" pci_link_speed=\"0.000000\"/>\n</object>\n",
      bus, bus, bus);
}

/* 2 packages x (1 NUMA node, 4 cores, 1 PU each): CPUs 0-3 and 4-7. GPUs 0000:18:00.0 and
 * 0000:19:00.0 hang off package 0, 0000:3b:00.0 off package 1, 0000:d8:00.0 off the machine
 * (so its nearest CPUs are all of them). */
static hwloc_topology_t gpu_topology(void) {
  static char x[16384];
  x[0] = '\0';
  xml(x, sizeof x, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<topology version=\"2.0\">\n");
  xml_obj(x, sizeof x, "Machine", 0, 0xff, 0x3,
          " allowed_cpuset=\"0xff\" allowed_nodeset=\"0x3\">");
  for (int p = 0; p < 2; p++) {
    unsigned cpus = 0xfu << (4 * p), node = 1u << p;
    xml_obj(x, sizeof x, "Package", p, cpus, node, ">");
    xml_obj(x, sizeof x, "NUMANode", p, cpus, node, " local_memory=\"1073741824\"/>");
    for (int c = 4 * p; c < 4 * p + 4; c++) {
      xml_obj(x, sizeof x, "Core", c, 1u << c, node, ">");
      xml_obj(x, sizeof x, "PU", c, 1u << c, node, "/>");
      xml(x, sizeof x, "</object>\n");
    }
    if (p == 0) xml_gpu(x, sizeof x, 0x18), xml_gpu(x, sizeof x, 0x19);
    else xml_gpu(x, sizeof x, 0x3b);
    xml(x, sizeof x, "</object>\n");
  }
  xml_gpu(x, sizeof x, 0xd8);
  xml(x, sizeof x, "</object>\n</topology>\n");
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) < 0 || hwloc_topology_set_xmlbuffer(t, x, (int)strlen(x) + 1) < 0 ||
      hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) < 0 ||
      hwloc_topology_load(t) < 0) {
    fprintf(stderr, "test_placement: cannot load the GPU XML topology\n");
    exit(1);
  }
  return t;
}

/* A bitmap as its list string ("0-3,8"), in a rotating static buffer for messages. */
static const char *str(hwloc_const_bitmap_t b) {
  static char buf[8][128];
  static int next;
  char *s = buf[next++ % 8];
  hwloc_bitmap_list_snprintf(s, 128, b);
  return s;
}

static int is_list(hwloc_const_bitmap_t b, const char *list) {
  hwloc_bitmap_t want = hwloc_bitmap_alloc();
  int ok = want && hwloc_bitmap_list_sscanf(want, list) == 0 && hwloc_bitmap_isequal(b, want);
  hwloc_bitmap_free(want);
  return ok;
}

static int plan(hwloc_topology_t t, hwloc_const_cpuset_t pool, int n, const char *const *ids,
                placement_plan *p) {
  char err[256] = "";
  int rc = placement_plan_node(t, pool, n, ids, p, err, sizeof err);
  CHECK(rc == 0, "placement_plan_node(n=%d): %s", n, err);
  return rc;
}

/* Expected CPU lists per rank (and sharers 1 unless shared != 0). */
static void expect(hwloc_topology_t t, int n, const char *const *ids, const char *const *want,
                   int shared, int near_gpu, const char *label) {
  placement_plan p;
  if (plan(t, NULL, n, ids, &p) == 0) {
    for (int r = 0; r < n; r++) {
      CHECK(is_list(p.cpus[r], want[r]), "%s: rank %d got CPUs %s, want %s", label, r,
            str(p.cpus[r]), want[r]);
      CHECK(p.sharers[r] == (shared ? shared : 1), "%s: rank %d sharers %d, want %d", label, r,
            p.sharers[r], shared ? shared : 1);
    }
    CHECK(p.near_gpu == near_gpu, "%s: near_gpu %d, want %d (note: %s)", label, p.near_gpu,
          near_gpu, p.note);
  }
  placement_plan_free(&p);
}

/* --- Spreading without GPUs ------------------------------------------------------------------ */

/* Logical core indexes [first, last] a set covers; 0 when it holds a part of a core, when the
 * cores are not contiguous, or when they span NUMA nodes. */
static int core_range(hwloc_topology_t t, hwloc_const_cpuset_t set, int *first, int *last) {
  int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE), count = 0;
  *first = -1;
  for (int i = 0; i < n; i++) {
    hwloc_obj_t c = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, i);
    if (!hwloc_bitmap_intersects(c->cpuset, set)) continue;
    if (!hwloc_bitmap_isincluded(c->cpuset, set)) return 0;
    if (*first < 0) *first = i;
    *last = i;
    count++;
  }
  return count > 0 && *last - *first + 1 == count;
}

static int numa_of(hwloc_topology_t t, hwloc_const_cpuset_t set) {
  int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE), found = -1;
  for (int i = 0; i < n; i++) {
    hwloc_obj_t node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, i);
    if (!hwloc_bitmap_intersects(node->cpuset, set)) continue;
    if (found >= 0 || !hwloc_bitmap_isincluded(set, node->cpuset)) return -1;
    found = i;
  }
  return found;
}

/* Every rank count on "pack:2 numa:1 core:8 pu:2": while ranks <= cores, each rank gets whole,
 * contiguous cores of one NUMA node (from 2 ranks on), ranks in core order, no core twice,
 * every core used, and the NUMA nodes' rank counts differ by at most one; beyond 16 ranks
 * every rank gets the whole machine and the plan says so. */
static void test_spread_properties(void) {
  hwloc_topology_t t = synthetic("pack:2 numa:1 core:8 pu:2");
  hwloc_const_cpuset_t all = hwloc_topology_get_allowed_cpuset(t);
  for (int n = 1; n <= 20; n++) {
    placement_plan p;
    if (plan(t, NULL, n, NULL, &p) != 0) continue;
    hwloc_bitmap_t used = hwloc_bitmap_alloc();
    int per_numa[2] = {0, 0}, prev_last = -1, first = 0, last = -1;
    for (int r = 0; r < n; r++) {
      int node = numa_of(t, p.cpus[r]);
      if (n > 16) {
        CHECK(hwloc_bitmap_isequal(p.cpus[r], all) && p.sharers[r] == n,
              "n=%d: rank %d has %s shared by %d, want the whole machine shared by %d", n, r,
              str(p.cpus[r]), p.sharers[r], n);
        continue;
      }
      CHECK(core_range(t, p.cpus[r], &first, &last), "n=%d: rank %d: CPUs %s are not whole "
            "contiguous cores", n, r, str(p.cpus[r]));
      CHECK(first > prev_last, "n=%d: rank %d starts at core %d, not after rank %d's (%d)", n, r,
            first, r - 1, prev_last);
      CHECK(!hwloc_bitmap_intersects(used, p.cpus[r]), "n=%d: rank %d shares CPUs (%s)", n, r,
            str(p.cpus[r]));
      CHECK(p.sharers[r] == 1, "n=%d: rank %d sharers %d", n, r, p.sharers[r]);
      CHECK(n < 2 || node >= 0, "n=%d: rank %d (CPUs %s) spans NUMA nodes", n, r, str(p.cpus[r]));
      if (node >= 0) per_numa[node]++;
      hwloc_bitmap_or(used, used, p.cpus[r]);
      prev_last = last;
    }
    if (n <= 16) {
      CHECK(hwloc_bitmap_isequal(used, all), "n=%d: cores left idle: used %s", n, str(used));
      CHECK(n < 2 || abs(per_numa[0] - per_numa[1]) <= 1, "n=%d: %d and %d ranks per NUMA node",
            n, per_numa[0], per_numa[1]);
    }
    hwloc_bitmap_free(used);
    placement_plan_free(&p);
  }
  hwloc_topology_destroy(t);
}

static void test_spread_cases(void) {
  hwloc_topology_t t = synthetic("pack:2 numa:1 core:8 pu:2");
  expect(t, 1, NULL, (const char *[]){"0-31"}, 0, 0, "one rank: the whole machine");
  expect(t, 2, NULL, (const char *[]){"0-15", "16-31"}, 0, 0, "two ranks: one NUMA node each");
  expect(t, 4, NULL, (const char *[]){"0-7", "8-15", "16-23", "24-31"}, 0, 0, "four ranks");
  /* three ranks: NUMA node 0 takes two (4 cores each), node 1 one (8 cores) */
  expect(t, 3, NULL, (const char *[]){"0-7", "8-15", "16-31"}, 0, 0, "three ranks");
  expect(t, 17, NULL, (const char *[]){"0-31", "0-31", "0-31", "0-31", "0-31", "0-31", "0-31",
                                       "0-31", "0-31", "0-31", "0-31", "0-31", "0-31", "0-31",
                                       "0-31", "0-31", "0-31"}, 17, 0, "more ranks than cores");
  hwloc_topology_destroy(t);

  /* fewer ranks than NUMA nodes: runs of whole nodes */
  t = synthetic("pack:4 numa:1 core:2 pu:1");
  expect(t, 2, NULL, (const char *[]){"0-3", "4-7"}, 0, 0, "two ranks on four NUMA nodes");
  expect(t, 3, NULL, (const char *[]){"0-1", "2-3", "4-7"}, 0, 0, "three ranks on four nodes");
  hwloc_topology_destroy(t);

  /* no Core level: PUs are the units */
  t = synthetic("pack:1 pu:6");
  CHECK(hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) == 0, "the synthetic topology has cores");
  expect(t, 3, NULL, (const char *[]){"0-1", "2-3", "4-5"}, 0, 0, "PUs without cores");
  hwloc_topology_destroy(t);
}

/* A pool that leaves NUMA node 0 six cores and node 1 one: ranks go where the cores are. */
static void test_uneven_pool(void) {
  hwloc_topology_t t = synthetic("pack:2 numa:1 core:8 pu:2");
  hwloc_bitmap_t pool = hwloc_bitmap_alloc();
  hwloc_bitmap_list_sscanf(pool, "0-11,16-17");
  placement_plan p;
  if (plan(t, pool, 2, NULL, &p) == 0) {
    CHECK(is_list(p.cpus[0], "0-5") && is_list(p.cpus[1], "6-11"),
          "uneven pool, 2 ranks: got %s and %s, want 0-5 and 6-11", str(p.cpus[0]),
          str(p.cpus[1]));
  }
  placement_plan_free(&p);
  if (plan(t, pool, 7, NULL, &p) == 0) {
    CHECK(is_list(p.cpus[5], "10-11") && is_list(p.cpus[6], "16-17"),
          "uneven pool, 7 ranks: ranks 5 and 6 got %s and %s, want 10-11 and 16-17",
          str(p.cpus[5]), str(p.cpus[6]));
  }
  placement_plan_free(&p);
  hwloc_bitmap_free(pool);
  hwloc_topology_destroy(t);
}

/* --- GPUs ------------------------------------------------------------------------------------ */

static void test_gpus(void) {
  hwloc_topology_t t = gpu_topology();
  expect(t, 2, (const char *[]){"0000:18:00.0", "0000:3b:00.0"}, (const char *[]){"0-3", "4-7"},
         0, 1, "one GPU per package");
  expect(t, 2, (const char *[]){"0000:3b:00.0", "0000:18:00.0"}, (const char *[]){"4-7", "0-3"},
         0, 1, "GPUs in the other order");
  expect(t, 2, (const char *[]){"00000000:3B:00.0", "0000:18:00.0"},
         (const char *[]){"4-7", "0-3"}, 0, 1, "upper case, 8-digit domain");
  /* two GPUs near package 0 split its cores; the GPU near package 1 gets all of those */
  expect(t, 3, (const char *[]){"0000:18:00.0", "0000:19:00.0", "0000:3b:00.0"},
         (const char *[]){"0-1", "2-3", "4-7"}, 0, 1, "two GPUs near one NUMA node");
  expect(t, 3, (const char *[]){"0000:3b:00.0", "0000:19:00.0", "0000:18:00.0"},
         (const char *[]){"4-7", "0-1", "2-3"}, 0, 1, "group members in local-rank order");
  /* ranks sharing a GPU (pipeline.devices) split its cores too */
  expect(t, 4, (const char *[]){"0000:18:00.0", "0000:18:00.0", "0000:3b:00.0", "0000:3b:00.0"},
         (const char *[]){"0-1", "2-3", "4-5", "6-7"}, 0, 1, "two ranks per GPU");
  /* six ranks near four cores: all six share them, still near the GPU */
  expect(t, 6, (const char *[]){"0000:18:00.0", "0000:18:00.0", "0000:19:00.0", "0000:19:00.0",
                                "0000:18:00.0", "0000:19:00.0"},
         (const char *[]){"0-3", "0-3", "0-3", "0-3", "0-3", "0-3"}, 6, 1, "more ranks than cores");
  /* a GPU at the machine level: its nearest CPUs are all of them, spread as usual */
  expect(t, 2, (const char *[]){"0000:d8:00.0", "0000:d8:00.0"}, (const char *[]){"0-3", "4-7"},
         0, 1, "GPU near the whole machine");

  /* fallbacks: the plan without GPUs, and a note saying why */
  static const struct {
    const char *ids[2], *note;
  } fallback[] = {
      {{"0000:99:00.0", "0000:3b:00.0"},
       "GPU 0000:99:00.0 (local rank 0) is not in the hwloc topology"},
      {{"0000:18:00.0", NULL}, "local rank 1 has no GPU"},
      {{"0000:18:00.0", "0000:d8:00.0"}, "overlapping CPU sets (0-3 and 0-7)"},
      {{"junk", "0000:18:00.0"}, "GPU junk (local rank 0) is not in the hwloc topology"},
  };
  for (size_t i = 0; i < sizeof fallback / sizeof *fallback; i++) {
    placement_plan p;
    if (plan(t, NULL, 2, fallback[i].ids, &p) == 0) {
      CHECK(!p.near_gpu && strstr(p.note, fallback[i].note), "fallback %zu: near_gpu %d, note '%s'",
            i, p.near_gpu, p.note);
      CHECK(is_list(p.cpus[0], "0-3") && is_list(p.cpus[1], "4-7"),
            "fallback %zu: got %s and %s, want the spread 0-3 and 4-7", i, str(p.cpus[0]),
            str(p.cpus[1]));
    }
    placement_plan_free(&p);
  }
  hwloc_topology_destroy(t);

  /* a synthetic topology has no PCI devices at all */
  t = synthetic("pack:2 numa:1 core:8 pu:2");
  placement_plan p;
  if (plan(t, NULL, 2, (const char *[]){"0000:3b:00.0", "0000:af:00.0"}, &p) == 0) {
    CHECK(!p.near_gpu &&
              strstr(p.note, "is not in the hwloc topology: cores spread as without GPUs"),
          "synthetic: note '%s'", p.note);
    CHECK(is_list(p.cpus[0], "0-15") && is_list(p.cpus[1], "16-31"), "synthetic: %s and %s",
          str(p.cpus[0]), str(p.cpus[1]));
  }
  placement_plan_free(&p);
  hwloc_topology_destroy(t);
}

/* --- Decisions and the printed line ---------------------------------------------------------- */

typedef struct {
  int rc;
  placement_result out;
  char set[128], err[256];
} decision;

static decision decide(hwloc_topology_t t, placement_request rq, const char *current,
                       int launcher, const char *why) {
  decision d;
  memset(&d, 0, sizeof d);
  hwloc_bitmap_t cur = hwloc_bitmap_alloc(), set = hwloc_bitmap_alloc();
  hwloc_bitmap_list_sscanf(cur, current);
  d.rc = placement_decide(t, &rq, cur, launcher, why, set, &d.out, d.err, sizeof d.err);
  hwloc_bitmap_list_snprintf(d.set, sizeof d.set, set);
  hwloc_bitmap_free(cur);
  hwloc_bitmap_free(set);
  return d;
}

#define CHECK_TEXT(d, want)                                                                   \
  CHECK((d).rc == 0 && strcmp((d).out.text, want) == 0, "rc %d (%s), text '%s', want '%s'", \
        (d).rc, (d).err, (d).out.text, want)

static void test_decide(void) {
  hwloc_topology_t t = synthetic("pack:2 numa:1 core:8 pu:2");
  placement_request rq = {.local_rank = 1, .local_size = 4, .bind = PT_BIND_AUTO, .gpu = -1};
  decision d = decide(t, rq, "0-31", PLACEMENT_LAUNCHER_OTHER, "");
  CHECK_TEXT(d, "cores 4-7 of 16 (NUMA node 0), CPUs 8-15");
  CHECK(d.out.bound && d.out.n_cores == 4 && d.out.threads == 4 && !strcmp(d.out.cpus, "8-15") &&
        !strcmp(d.set, "8-15"), "4 ranks: bound %d, %d cores, %d threads, cpus %s, set %s",
        d.out.bound, d.out.n_cores, d.out.threads, d.out.cpus, d.set);

  /* Open MPI's default (np <= 2: one core) is replaced, and the line says so */
  rq.local_rank = 0, rq.local_size = 1;
  d = decide(t, rq, "0-1", PLACEMENT_LAUNCHER_OMPI_DEFAULT, "");
  CHECK_TEXT(d, "all 16 cores (NUMA nodes 0-1), CPUs 0-31; replaces the binding it started with "
                "(CPUs 0-1; --bind none keeps it)");
  CHECK(d.out.bound && d.out.threads == 16, "np 1: bound %d threads %d", d.out.bound,
        d.out.threads);

  /* an explicit mpirun binding is kept */
  d = decide(t, rq, "4-5", PLACEMENT_LAUNCHER_EXPLICIT, "OMPI_MCA_hwloc_base_binding_policy=core");
  CHECK_TEXT(d, "kept mpirun's binding (OMPI_MCA_hwloc_base_binding_policy=core): core 2 of 16 "
                "(NUMA node 0), CPUs 4-5");
  CHECK(!d.out.bound && d.out.n_cores == 1 && d.out.threads == 1 && !strcmp(d.set, "4-5"),
        "explicit: bound %d cores %d threads %d set %s", d.out.bound, d.out.n_cores,
        d.out.threads, d.set);

  /* taskset / numactl / another launcher: kept */
  d = decide(t, rq, "16-23", PLACEMENT_LAUNCHER_OTHER, "");
  CHECK_TEXT(d, "kept the binding it was started with: cores 8-11 of 16 (NUMA node 1), CPUs 16-23");
  CHECK(!d.out.bound && d.out.threads == 4, "taskset: bound %d threads %d", d.out.bound,
        d.out.threads);

  /* --bind none describes and keeps whatever it finds */
  rq.bind = PT_BIND_NONE, rq.local_size = 4;
  d = decide(t, rq, "0-31", PLACEMENT_LAUNCHER_OMPI_DEFAULT, "");
  CHECK_TEXT(d, "--bind none: not bound, 4 ranks share 16 cores");
  CHECK(!d.out.bound && d.out.threads == 4, "none: bound %d threads %d", d.out.bound,
        d.out.threads);
  d = decide(t, rq, "0-1", PLACEMENT_LAUNCHER_OMPI_DEFAULT, "");
  CHECK_TEXT(d, "--bind none: core 0 of 16 (NUMA node 0), CPUs 0-1");

  /* more ranks than cores */
  rq.bind = PT_BIND_AUTO, rq.local_size = 20, rq.local_rank = 19;
  d = decide(t, rq, "0-31", PLACEMENT_LAUNCHER_OMPI_DEFAULT, "");
  CHECK_TEXT(d, "not bound: 20 ranks share 16 cores");
  CHECK(d.out.bound && d.out.threads == 1 && !strcmp(d.set, "0-31"), "20 ranks: bound %d threads "
        "%d set %s", d.out.bound, d.out.threads, d.set);

  /* a bad request */
  rq.local_rank = 20;
  d = decide(t, rq, "0-31", PLACEMENT_LAUNCHER_OTHER, "");
  CHECK(d.rc == -1 && strstr(d.err, "local rank 20 of 20 is out of range"), "bad rank: %d '%s'",
        d.rc, d.err);
  rq.local_rank = 0, rq.bind = 7;
  d = decide(t, rq, "0-31", PLACEMENT_LAUNCHER_OTHER, "");
  CHECK(d.rc == -1 && strstr(d.err, "unknown bind mode 7"), "bad mode: %d '%s'", d.rc, d.err);
  hwloc_topology_destroy(t);
}

static void test_decide_gpus(void) {
  hwloc_topology_t t = gpu_topology();
  const char *ids[] = {"0000:18:00.0", "0000:3b:00.0"};
  placement_request rq = {.local_rank = 1, .local_size = 2, .bind = PT_BIND_AUTO, .gpu = 3,
                          .gpu_bus_ids = ids};
  decision d = decide(t, rq, "0-7", PLACEMENT_LAUNCHER_OMPI_DEFAULT, "");
  CHECK_TEXT(d, "cores 4-7 of 8 (NUMA node 1), CPUs 4-7, near GPU 3 (0000:3b:00.0)");
  CHECK(d.out.near_gpu && d.out.threads == 4, "gpu: near %d threads %d", d.out.near_gpu,
        d.out.threads);

  const char *shared[] = {"0000:18:00.0", "0000:18:00.0", "0000:18:00.0", "0000:18:00.0",
                          "0000:18:00.0"};
  rq = (placement_request){.local_rank = 4, .local_size = 5, .bind = PT_BIND_AUTO, .gpu = 0,
                           .gpu_bus_ids = shared};
  d = decide(t, rq, "0-7", PLACEMENT_LAUNCHER_OTHER, "");
  CHECK_TEXT(d, "cores 0-3 of 8 (NUMA node 0), CPUs 0-3, shared by 5 ranks, near GPU 0 "
                "(0000:18:00.0)");
  CHECK(d.out.threads == 1, "5 ranks on 4 cores: %d threads", d.out.threads);

  const char *lost[] = {"0000:99:00.0", "0000:3b:00.0"};
  rq = (placement_request){.local_rank = 0, .local_size = 2, .bind = PT_BIND_AUTO, .gpu = 0,
                           .gpu_bus_ids = lost};
  d = decide(t, rq, "0-7", PLACEMENT_LAUNCHER_OTHER, "");
  CHECK_TEXT(d, "cores 0-3 of 8 (NUMA node 0), CPUs 0-3; GPU 0000:99:00.0 (local rank 0) is not "
                "in the hwloc topology: cores spread as without GPUs");
  CHECK(!d.out.near_gpu, "lost GPU: near_gpu %d", d.out.near_gpu);

  /* a kept binding on the wrong package gets a warning in the line */
  rq = (placement_request){.local_rank = 1, .local_size = 2, .bind = PT_BIND_AUTO, .gpu = 1,
                           .gpu_bus_ids = ids};
  d = decide(t, rq, "1", PLACEMENT_LAUNCHER_EXPLICIT, "OMPI_MCA_hwloc_base_cpu_list=1");
  CHECK_TEXT(d, "kept mpirun's binding (OMPI_MCA_hwloc_base_cpu_list=1): core 1 of 8 "
                "(NUMA node 0), CPUs 1; not near its GPU 0000:3b:00.0 (nearest CPUs 4-7)");
  hwloc_topology_destroy(t);
}

/* --- Launcher detection ---------------------------------------------------------------------- */

static const char *const LAUNCH_VARS[] = {
    "OMPI_MCA_hwloc_base_binding_policy", "OMPI_MCA_hwloc_base_cpu_list",
    "OMPI_MCA_hwloc_base_cpu_set",        "OMPI_MCA_orte_rankfile",
    "OMPI_MCA_rmaps_rank_file_path",      "PRTE_MCA_hwloc_default_binding_policy",
    "PRTE_MCA_hwloc_default_cpu_list",    "OMPI_MCA_rmaps_base_mapping_policy",
    "PRTE_MCA_rmaps_default_mapping_policy", "OMPI_MCA_orte_hnp_uri", "PRTE_LAUNCHED"};

static void test_launcher(void) {
  for (size_t i = 0; i < sizeof LAUNCH_VARS / sizeof *LAUNCH_VARS; i++) unsetenv(LAUNCH_VARS[i]);
  char why[256];
  CHECK(placement_launcher_binding(why, sizeof why) == PLACEMENT_LAUNCHER_OTHER, "no launcher");
  setenv("OMPI_MCA_orte_hnp_uri", "1.0;tcp://127.0.0.1:1", 1);
  CHECK(placement_launcher_binding(why, sizeof why) == PLACEMENT_LAUNCHER_OMPI_DEFAULT,
        "mpirun without a binding option");
  setenv("OMPI_MCA_rmaps_base_mapping_policy", "core", 1);
  CHECK(placement_launcher_binding(why, sizeof why) == PLACEMENT_LAUNCHER_OMPI_DEFAULT,
        "--map-by core alone leaves the default binding");
  setenv("OMPI_MCA_hwloc_base_binding_policy", "none", 1);
  CHECK(placement_launcher_binding(why, sizeof why) == PLACEMENT_LAUNCHER_OMPI_DEFAULT,
        "--bind-to none leaves the choice to pipetrain");
  setenv("OMPI_MCA_rmaps_base_mapping_policy", "slot:PE=2", 1);
  CHECK(placement_launcher_binding(why, sizeof why) == PLACEMENT_LAUNCHER_EXPLICIT &&
        !strcmp(why, "OMPI_MCA_rmaps_base_mapping_policy=slot:PE=2"), "PE=2: why '%s'", why);
  setenv("OMPI_MCA_hwloc_base_binding_policy", "core", 1);
  CHECK(placement_launcher_binding(why, sizeof why) == PLACEMENT_LAUNCHER_EXPLICIT &&
        !strcmp(why, "OMPI_MCA_hwloc_base_binding_policy=core"), "--bind-to core: why '%s'", why);
  for (size_t i = 0; i < sizeof LAUNCH_VARS / sizeof *LAUNCH_VARS; i++) unsetenv(LAUNCH_VARS[i]);
  setenv("PRTE_MCA_hwloc_default_cpu_list", "0-3", 1);
  CHECK(placement_launcher_binding(why, sizeof why) == PLACEMENT_LAUNCHER_EXPLICIT,
        "PRRTE cpu list");
  unsetenv("PRTE_MCA_hwloc_default_cpu_list");
}

/* --- The ranks-per-GPU rule ------------------------------------------------------------------ */

static void test_check_gpus(void) {
  char err[512] = "";
  CHECK(placement_check_gpus(4, 2, 0, err, sizeof err) == -1, "4 ranks, 2 GPUs, no devices");
  CHECK(strstr(err, "4 ranks on this node but only 2 GPUs") &&
        strstr(err, "Start at most 2 ranks per node") &&
        strstr(err, "comm.backend: mpi (and e.g. pipeline.devices: [0, 0, 1, 1])"),
        "message: %s", err);
  CHECK(placement_check_gpus(3, 1, 0, err, sizeof err) == -1 &&
        strstr(err, "3 ranks on this node but only 1 GPU:") && strstr(err, "at most 1 rank per") &&
        strstr(err, "[0, 0, 0]"), "one GPU: %s", err);
  CHECK(placement_check_gpus(9, 8, 0, err, sizeof err) == -1 && !strstr(err, "e.g."),
        "no example list past 8 ranks: %s", err);
  CHECK(placement_check_gpus(4, 2, 1, err, sizeof err) == 0, "devices given: allowed");
  CHECK(placement_check_gpus(2, 2, 0, err, sizeof err) == 0, "one GPU each: allowed");
  CHECK(placement_check_gpus(1, 8, 0, err, sizeof err) == 0, "fewer ranks than GPUs: allowed");
  CHECK(placement_check_gpus(4, 0, 0, err, sizeof err) == 0, "no GPUs (a CPU run): allowed");
}

/* --- One real binding ------------------------------------------------------------------------ */

/* This process's affinity as the kernel reports it (independent of hwloc). */
static int kernel_affinity(hwloc_bitmap_t out) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[4096];
  int ok = 0;
  while (f && !ok && fgets(line, sizeof line, f))
    if (!strncmp(line, "Cpus_allowed_list:", 18))
      ok = hwloc_bitmap_list_sscanf(out, line + 18) == 0;
  if (f) fclose(f);
  return ok;
}

static void test_apply_here(void) {
  for (size_t i = 0; i < sizeof LAUNCH_VARS / sizeof *LAUNCH_VARS; i++) unsetenv(LAUNCH_VARS[i]);
  char err[256] = "";
  placement_result out;
  placement_request rq = {.local_rank = 0, .local_size = 1, .bind = PT_BIND_NONE, .gpu = -1};
  CHECK(placement_apply(&rq, &out, err, sizeof err) == 0 && !out.bound && out.n_cores >= 1 &&
        out.threads >= 1 && !strncmp(out.text, "--bind none: ", 13), "none here: %s / %s",
        err, out.text);
  rq.bind = PT_BIND_AUTO;
  CHECK(placement_apply(&rq, &out, err, sizeof err) == 0, "auto here: %s", err);
  hwloc_bitmap_t k = hwloc_bitmap_alloc(), r = hwloc_bitmap_alloc();
  CHECK(kernel_affinity(k) && hwloc_bitmap_list_sscanf(r, out.cpus) == 0 &&
            hwloc_bitmap_isequal(k, r),
        "after placement_apply the kernel says CPUs %s, the result says %s (%s)", str(k), out.cpus,
        out.text);
  printf("placement here: %s\n", out.text);
  hwloc_bitmap_free(k);
  hwloc_bitmap_free(r);
}

int main(void) {
  test_spread_properties();
  test_spread_cases();
  test_uneven_pool();
  test_gpus();
  test_decide();
  test_decide_gpus();
  test_launcher();
  test_check_gpus();
  test_apply_here();
  return test_summary("placement");
}
