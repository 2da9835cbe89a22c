// A library that tests/e2e/cuda_backend.sh's stand-in links against but the loader cannot find at run time.
extern "C" int dtrain_absent_dependency() { return 0; }
