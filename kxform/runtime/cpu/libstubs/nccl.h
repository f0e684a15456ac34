// Stand-in for <nccl.h> where the toolkit lacks it: host-only types (kxcpu_host_library.h).
#pragma once
#include "kxcpu_host_library.h"
