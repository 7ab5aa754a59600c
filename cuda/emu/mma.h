// mma.h - stand-in for the CUDA header under the emulator (emu.h)
#pragma once
#include "emu.h"
