#!/usr/bin/env python3
"""Writes the .npy fixtures that tests/runtime/npy_test.cpp loads.

The files are committed; this script is not run by the build (CI has no NumPy). It
records how they were made: `python3 make_fixtures.py` in this directory, with NumPy 2.x
(the files in the repository were written by NumPy 2.4.6). The values are spelled out in
npy_test.cpp as well.
"""
import numpy as np
from numpy.lib import format as npf


def save(name, arr, version=None):
    with open(name, "wb") as f:
        if version is None:
            np.save(f, arr)  # NumPy picks format 1.0 for these small headers
        else:
            npf.write_array(f, arr, version=version)


# format 1.0, float32, 2-D; includes a value float32 cannot hold exactly (0.1).
save("f32_2x3.npy", np.array([[1.5, -2.25, 0.0], [0.1, 65504.0, -1.0]], dtype="<f4"))
# format 1.0, int64, 1-D, with a value beyond 32 bits.
save("i64_4.npy", np.array([0, -1, 2**40, 7], dtype="<i8"))
# format 2.0, float16: 1/3 rounds to 0.333251953125; 6e-8 is an f16 subnormal (1 * 2^-24).
save("f16_2x2_v2.npy", np.array([[1.0, -0.5], [1.0 / 3.0, 6e-8]], dtype="<f2"), version=(2, 0))
# format 3.0 (utf-8 header), int32.
save("i4_2x2_v3.npy", np.array([[1, -2], [2147483647, -2147483648]], dtype="<i4"), version=(3, 0))
# fortran_order True: qkv must reject it.
save("f4_fortran.npy", np.asfortranarray(np.array([[1, 2], [3, 4]], dtype="<f4")))
# a bool array ('|b1'): an unsupported dtype qkv must reject.
save("b1_3.npy", np.array([True, False, True]))
