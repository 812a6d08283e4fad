// A program with a __managed__ variable, which Orrery refuses when the program registers it
// (tests/native/test_exports.py).
#include <cstdio>

__managed__ float counter;

int main() {
  counter = 1;
  printf("managed: ran\n");
  return 0;
}
