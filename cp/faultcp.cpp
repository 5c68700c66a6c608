// faultcp: the control plane. The serve command comes with the API.
#include <cstdio>

int main() {
  std::fprintf(stderr, "faultcp: the serve command is not built yet\n");
  return 2;
}
