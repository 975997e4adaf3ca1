/* Iterative radix-2 complex FFT: forward and inverse transforms of a pseudo-random signal, repeated.
 * Usage: fft LOG2N REPS   (written for perftune; MIT licence)
 * Output: round-trip error bound and spectrum checksum with %.10e (compare with a tolerance). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static void fft(int n, double *re, double *im, int inverse) {
    for (int i = 1, j = 0; i < n; i++) {  /* bit reversal */
        int bit = n >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j ^= bit;
        if (i < j) { double t = re[i]; re[i] = re[j]; re[j] = t; t = im[i]; im[i] = im[j]; im[j] = t; }
    }
    for (int len = 2; len <= n; len <<= 1) {
        double ang = 2 * M_PI / len * (inverse ? 1 : -1);
        double wr = cos(ang), wi = sin(ang);
        for (int i = 0; i < n; i += len) {
            double cr = 1.0, ci = 0.0;
            for (int k = 0; k < len / 2; k++) {
                int a = i + k, b = i + k + len / 2;
                double xr = re[b] * cr - im[b] * ci, xi = re[b] * ci + im[b] * cr;
                re[b] = re[a] - xr; im[b] = im[a] - xi;
                re[a] += xr; im[a] += xi;
                double nr = cr * wr - ci * wi; ci = cr * wi + ci * wr; cr = nr;
            }
        }
    }
    if (inverse) for (int i = 0; i < n; i++) { re[i] /= n; im[i] /= n; }
}

int main(int argc, char **argv) {
    int log2n = argc > 1 ? atoi(argv[1]) : 19, reps = argc > 2 ? atoi(argv[2]) : 8;
    if (log2n < 2 || log2n > 26 || reps < 1) { fprintf(stderr, "usage: fft LOG2N REPS\n"); return 2; }
    int n = 1 << log2n;
    double *re = malloc(sizeof(double) * n), *im = malloc(sizeof(double) * n), *orig = malloc(sizeof(double) * n);
    if (!re || !im || !orig) { fprintf(stderr, "out of memory\n"); return 1; }
    unsigned int s = 12345u;
    for (int i = 0; i < n; i++) { s = s * 1664525u + 1013904223u; orig[i] = (s >> 8) / 16777216.0 - 0.5; }
    double spectrum = 0.0, err = 0.0;
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < n; i++) { re[i] = orig[i] * (1.0 + 0.01 * r); im[i] = 0.0; }
        fft(n, re, im, 0);
        for (int i = 0; i < n; i += 7) spectrum += sqrt(re[i] * re[i] + im[i] * im[i]);
        fft(n, re, im, 1);
        for (int i = 0; i < n; i++) err = fmax(err, fabs(re[i] - orig[i] * (1.0 + 0.01 * r)));
    }
    printf("spectrum %.10e\nroundtrip_ok %d\n", spectrum, err < 1e-9);
    free(re); free(im); free(orig);
    return 0;
}
