// kvreg_nats.h compiles as C++ (the C suite compiles it as C99) and links.
#include <kvreg_nats.h>

int main() { return kvreg_nats_available() >= 0 ? 0 : 1; }
