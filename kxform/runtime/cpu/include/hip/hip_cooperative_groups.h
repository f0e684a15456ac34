// Shadow of hip/hip_cooperative_groups.h for the kxform CPU runtime.
#pragma once
#include "hip_runtime.h"
#include "../cooperative_groups.h"
