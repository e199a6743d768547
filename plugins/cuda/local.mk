# The GPU compute backend (CUDA runtime + cuBLAS).
