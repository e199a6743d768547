# KS_CHECK_CUDA: the GPU compute plugin's dependency (CUDA runtime and cuBLAS).
# --with-cuda[=DIR] / --without-cuda; auto-detected in /usr/local/cuda by default.
# Links libcudart and libcublas only: LIBRARY_PATH on these machines points at the
# driver stubs, and a -lcuda against a stub would fail at run time on a GPU host.
AC_DEFUN([KS_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [build the CUDA compute plugin (default: auto, DIR=/usr/local/cuda)])],
    [], [with_cuda=auto])
  ks_have_cuda=no
  ks_cuda_summary="no: disabled by --without-cuda"
  CUDA_HOME=
  AS_IF([test "x$with_cuda" != xno], [
    AS_CASE([$with_cuda], [yes|auto], [CUDA_HOME=/usr/local/cuda], [CUDA_HOME=$with_cuda])
    ks_cuda_libdir=$CUDA_HOME/lib64
    AS_IF([test -d "$ks_cuda_libdir"], [], [ks_cuda_libdir=$CUDA_HOME/lib])
    CUDA_CFLAGS="-I$CUDA_HOME/include"
    CUDA_LIBS="-L$ks_cuda_libdir -Wl,-rpath,$ks_cuda_libdir -lcublas -lcudart"
    ks_save_CPPFLAGS=$CPPFLAGS; ks_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $CUDA_CFLAGS"; LIBS="$CUDA_LIBS $LIBS"
    AC_CHECK_HEADER([cuda_runtime_api.h], [
      AC_CHECK_HEADER([cublas_v2.h], [
        AC_MSG_CHECKING([for cudaGetDeviceCount and cublasCreate in $ks_cuda_libdir])
        AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cuda_runtime_api.h>
#include <cublas_v2.h>]], [[int n; cublasHandle_t h; cudaGetDeviceCount (&n); cublasCreate (&h);]])],
          [ks_have_cuda=yes], [])
        AC_MSG_RESULT([$ks_have_cuda])])])
    CPPFLAGS=$ks_save_CPPFLAGS; LIBS=$ks_save_LIBS
    AC_PATH_PROG([NVCC], [nvcc], [], [$CUDA_HOME/bin:$PATH])
    AS_IF([test $ks_have_cuda = yes && test -z "$NVCC"],
      [ks_have_cuda=no
       ks_cuda_why="nvcc (for the training kernels) not found in $CUDA_HOME/bin or PATH"],
      [ks_cuda_why="CUDA runtime or cuBLAS not found under $CUDA_HOME (--with-cuda=DIR)"])
    AS_IF([test $ks_have_cuda = yes], [ks_cuda_summary="yes ($CUDA_HOME, $NVCC)"],
      [ks_cuda_summary="no: $ks_cuda_why"
       CUDA_CFLAGS=; CUDA_LIBS=
       AS_IF([test "x$with_cuda" != xauto],
         [AC_MSG_ERROR([--with-cuda was given, but $ks_cuda_why])])])
  ])
  dnl PTX for any GPU from Turing on (the driver compiles it), machine code for Ampere
  dnl and Hopper.
  AC_ARG_VAR([NVCCFLAGS], [flags for nvcc (default: -O3 and code for compute_75 PTX, sm_80, sm_90)])
  AS_IF([test "x$NVCCFLAGS" = x],
    [NVCCFLAGS="-O3 -gencode arch=compute_75,code=compute_75 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90"])
  AC_SUBST([CUDA_HOME])
  AC_SUBST([CUDA_CFLAGS])
  AC_SUBST([CUDA_LIBS])
  AM_CONDITIONAL([HAVE_CUDA], [test $ks_have_cuda = yes])
])
