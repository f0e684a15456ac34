"""Runtimes that launch one kernel on prepared inputs: the GPU (pycuda) and the CPU emulation."""
