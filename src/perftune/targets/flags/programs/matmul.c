/* Dense linear algebra: C = A*B, then a few steps of LU-free Gauss-Seidel style updates.
 * Usage: matmul N REPS   (written for perftune; MIT licence)
 * Output: checksums printed with %.10e (compare with a relative tolerance: -march may contract to FMA). */
#include <stdio.h>
#include <stdlib.h>

static unsigned long long rng_state = 88172645463325252ULL;
static double next_unit(void) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

static void multiply(int n, const double *a, const double *b, double *c) {
    for (int i = 0; i < n * n; i++) c[i] = 0.0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++) {
            double aik = a[i * n + k];
            for (int j = 0; j < n; j++) c[i * n + j] += aik * b[k * n + j];
        }
}

static void transpose_add(int n, double *a, const double *c, double scale) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) a[i * n + j] = 0.5 * a[i * n + j] + scale * c[j * n + i];
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 640;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (n < 2 || reps < 1) { fprintf(stderr, "usage: matmul N REPS\n"); return 2; }
    double *a = malloc(sizeof(double) * n * n), *b = malloc(sizeof(double) * n * n);
    double *c = malloc(sizeof(double) * n * n);
    if (!a || !b || !c) { fprintf(stderr, "out of memory\n"); return 1; }
    for (int i = 0; i < n * n; i++) { a[i] = next_unit() - 0.5; b[i] = next_unit() - 0.5; }
    for (int r = 0; r < reps; r++) {
        multiply(n, a, b, c);
        transpose_add(n, a, c, 1.0 / n);
    }
    double trace = 0.0, total = 0.0;
    for (int i = 0; i < n; i++) trace += c[i * n + i];
    for (int i = 0; i < n * n; i++) total += c[i] * c[i];
    printf("trace %.10e\nfrobenius2 %.10e\n", trace, total);
    free(a); free(b); free(c);
    return 0;
}
