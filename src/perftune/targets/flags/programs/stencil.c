/* 2-D heat equation: 5-point Jacobi stencil on a single-precision grid with fixed boundary sources.
 * Usage: stencil N STEPS   (written for perftune; MIT licence)
 * Output: sums with %.8e (compare with a relative tolerance). */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1536, steps = argc > 2 ? atoi(argv[2]) : 300;
    if (n < 8 || steps < 1) { fprintf(stderr, "usage: stencil N STEPS\n"); return 2; }
    float *u = calloc((size_t)n * n, sizeof(float)), *w = calloc((size_t)n * n, sizeof(float));
    if (!u || !w) { fprintf(stderr, "out of memory\n"); return 1; }
    for (int i = 0; i < n; i++) { u[i] = w[i] = 1.0f; u[(size_t)i * n] = w[(size_t)i * n] = 0.5f; }
    for (int s = 0; s < steps; s++) {
        for (int i = 1; i < n - 1; i++)
            for (int j = 1; j < n - 1; j++)
                w[(size_t)i * n + j] = 0.25f * (u[(size_t)(i - 1) * n + j] + u[(size_t)(i + 1) * n + j] +
                                                u[(size_t)i * n + j - 1] + u[(size_t)i * n + j + 1]);
        float *t = u; u = w; w = t;
    }
    double total = 0.0, centre = 0.0;
    for (int j = 0; j < n; j++) centre += u[(size_t)8 * n + j];
    for (size_t i = 0; i < (size_t)n * n; i++) total += u[i];
    printf("total %.8e\nrow8 %.8e\n", total, centre);
    free(u); free(w);
    return 0;
}
