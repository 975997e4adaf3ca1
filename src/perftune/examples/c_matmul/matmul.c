/* Blocked matrix multiplication with compile-time knobs (perftune example).
 *   -DN=...        matrix size
 *   -DBLOCK=...    tile size over j and k
 *   -DUNROLL=...   unroll factor of the innermost loop (#pragma GCC unroll)
 *   -DORDER_xyz    loop order inside a tile: ijk, ikj, jik, jki, kij, kji
 * Prints a checksum on stdout; matrix entries are small integers, so every loop order gives
 * exactly the same result. */
#include <stdio.h>
#include <stdlib.h>

#ifndef N
#define N 320
#endif
#ifndef BLOCK
#define BLOCK 16
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#define STR2(x) #x
#define STR(x) STR2(x)
#define MIN(a, b) ((a) < (b) ? (a) : (b))

static double A[N][N], B[N][N], C[N][N];

int main(void) {
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            A[i][j] = (double)((i * 7 + j * 3) % 10);
            B[i][j] = (double)((i * 5 + j * 11) % 10);
            C[i][j] = 0.0;
        }
    for (int jj = 0; jj < N; jj += BLOCK)
        for (int kk = 0; kk < N; kk += BLOCK) {
            int je = MIN(jj + BLOCK, N), ke = MIN(kk + BLOCK, N);
#if defined(ORDER_ikj)
            for (int i = 0; i < N; i++)
                for (int k = kk; k < ke; k++) {
                    double a = A[i][k];
                    _Pragma(STR(GCC unroll UNROLL))
                    for (int j = jj; j < je; j++) C[i][j] += a * B[k][j];
                }
#elif defined(ORDER_jik)
            for (int j = jj; j < je; j++)
                for (int i = 0; i < N; i++) {
                    double s = C[i][j];
                    _Pragma(STR(GCC unroll UNROLL))
                    for (int k = kk; k < ke; k++) s += A[i][k] * B[k][j];
                    C[i][j] = s;
                }
#elif defined(ORDER_jki)
            for (int j = jj; j < je; j++)
                for (int k = kk; k < ke; k++) {
                    double b = B[k][j];
                    _Pragma(STR(GCC unroll UNROLL))
                    for (int i = 0; i < N; i++) C[i][j] += A[i][k] * b;
                }
#elif defined(ORDER_kij)
            for (int k = kk; k < ke; k++)
                for (int i = 0; i < N; i++) {
                    double a = A[i][k];
                    _Pragma(STR(GCC unroll UNROLL))
                    for (int j = jj; j < je; j++) C[i][j] += a * B[k][j];
                }
#elif defined(ORDER_kji)
            for (int k = kk; k < ke; k++)
                for (int j = jj; j < je; j++) {
                    double b = B[k][j];
                    _Pragma(STR(GCC unroll UNROLL))
                    for (int i = 0; i < N; i++) C[i][j] += A[i][k] * b;
                }
#else /* ijk */
            for (int i = 0; i < N; i++)
                for (int j = jj; j < je; j++) {
                    double s = C[i][j];
                    _Pragma(STR(GCC unroll UNROLL))
                    for (int k = kk; k < ke; k++) s += A[i][k] * B[k][j];
                    C[i][j] = s;
                }
#endif
        }
    double checksum = 0.0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) checksum += C[i][j] * (double)((i + 2 * j) % 7);
    printf("checksum %.1f\n", checksum);
    return 0;
}
