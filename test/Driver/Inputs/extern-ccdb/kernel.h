// Parses only with -I include (for kernel_config.h) and KERNEL_FLOAT
// defined, as compile_commands.json.in's command has them.
#include "kernel_config.h"
#include <stdint.h>
extern "C" int negate(int64_t N, const KERNEL_FLOAT *x, KERNEL_FLOAT *out);
