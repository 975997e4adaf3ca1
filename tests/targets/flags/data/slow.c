/* Sleeps a given number of milliseconds, then prints a checksum: a program whose every run is slow,
   whatever the flags, so that a short time budget runs out with a candidate in flight. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    long ms = argc > 1 ? atol(argv[1]) : 500;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    double sum = 0.0;
    for (int i = 1; i <= 1000; i++) sum += 1.0 / i;
    printf("%.6f\n", sum);
    return 0;
}
