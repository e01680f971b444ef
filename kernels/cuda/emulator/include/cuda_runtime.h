// Stand-in for the CUDA runtime header when kernels/cuda/*.cu are compiled
// as plain C++ for the SIMT emulator (see ../run.sh).
#pragma once
#include "simt.hpp"
