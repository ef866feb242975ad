#include "core/env.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

int pt_env_switch(const char *name, const char *word0, const char *word1) {
  const char *v = getenv(name);
  if (!v || !*v || !strcmp(v, word0)) return 0;
  if (!strcmp(v, word1)) return 1;
  pt_fail_input("%s=%s: the environment variable takes %s or %s", name, v, word0, word1);
  return 0;
}
