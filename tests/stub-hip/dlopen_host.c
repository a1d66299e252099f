/* Load a fixture library with dlopen() and run its entry points, so a
 * transformed shared library is exercised the way an application uses it. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: %s LIB\n", argv[0]); return 2; }
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 3; }
  int r = 0;
  int (*axpy)(int) = (int (*)(int))dlsym(h, "corpus_run_axpy");
  int (*reduce)(int) = (int (*)(int))dlsym(h, "corpus_run_reduce");
  if (axpy) r |= axpy(1 << 10);
  if (reduce) r |= reduce(1 << 10);
  printf("dlopen result %d\n", r);
  return dlclose(h) == 0 ? r : 4;
}
