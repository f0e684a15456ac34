/* kxform stub: declarations come from kxform_cuda_prelude.h */
#pragma once
