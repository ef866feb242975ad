/* data/source.c: the table of data sources (data/source.h). */
#include "data/source.h"

#include <string.h>

extern const data_source data_source_bytes, data_source_u16, data_source_u32, data_source_f32;

/* One entry per data.format (declared above). */
static const data_source *const data_sources[] = {&data_source_bytes, &data_source_u16,
                                                  &data_source_u32, &data_source_f32, NULL};

const data_source *data_source_find(const char *name) {
  for (int i = 0; data_sources[i]; i++)
    if (!strcmp(data_sources[i]->name, name)) return data_sources[i];
  return NULL;
}
