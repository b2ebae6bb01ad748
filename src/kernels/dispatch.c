/* dispatch.c — chooses the kernel implementation once per process. */
#include "kernels.h"

const qtk__kernels *qtk__kernels_active(void) { return &qtk__kernels_ref; }
