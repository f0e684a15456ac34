// Shadow of the cooperative-groups header for the kxform CPU runtime (see ../cooperative_groups.h).
#pragma once
#include "../cooperative_groups.h"
