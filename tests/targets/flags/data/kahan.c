/* Compensated (Kahan) summation: -ffast-math lets gcc cancel the compensation and vectorise the sum,
 * which is faster but changes the printed digits. Used by the tests of the flags target. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000000, reps = argc > 2 ? atoi(argv[2]) : 20;
    double *x = malloc(sizeof(double) * n);
    if (!x) return 1;
    for (int i = 0; i < n; i++) x[i] = 1.0 / (1.0 + i) + (i % 7) * 1e-9;
    double total = 0.0;
    for (int r = 0; r < reps; r++) {
        double sum = 0.0, c = 0.0;
        for (int i = 0; i < n; i++) {
            double y = x[i] - c, t = sum + y;
            c = (t - sum) - y;
            sum = t;
        }
        total += sum;
    }
    printf("%.17g\n", total);
    free(x);
    return 0;
}
