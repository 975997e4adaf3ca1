/* Integer work: radix-free sorting (introsort-like quicksort + insertion sort) and an open-addressing
 * hash table with inserts and lookups.  Usage: hashsort N REPS   (written for perftune; MIT licence)
 * Output: exact integers (compare exactly). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t state = 0x9E3779B97F4A7C15ULL;
static uint64_t next(void) { state ^= state >> 12; state ^= state << 25; state ^= state >> 27; return state * 2685821657736338717ULL; }

static void insertion(uint32_t *a, int n) {
    for (int i = 1; i < n; i++) { uint32_t x = a[i]; int j = i - 1; while (j >= 0 && a[j] > x) { a[j + 1] = a[j]; j--; } a[j + 1] = x; }
}
static void quick(uint32_t *a, int n) {
    while (n > 24) {
        uint32_t p = a[n / 2], lo = a[0], hi = a[n - 1];  /* median of three */
        if ((lo <= p && p <= hi) || (hi <= p && p <= lo)) {} else if ((p <= lo && lo <= hi) || (hi <= lo && lo <= p)) p = lo; else p = hi;
        int i = 0, j = n - 1;
        while (i <= j) { while (a[i] < p) i++; while (a[j] > p) j--; if (i <= j) { uint32_t t = a[i]; a[i] = a[j]; a[j] = t; i++; j--; } }
        if (j + 1 < n - i) { quick(a, j + 1); a += i; n -= i; } else { quick(a + i, n - i); n = j + 1; }
    }
    insertion(a, n);
}

static uint32_t hash32(uint32_t x) { x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16; return x; }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000000, reps = argc > 2 ? atoi(argv[2]) : 3;
    if (n < 16 || reps < 1) { fprintf(stderr, "usage: hashsort N REPS\n"); return 2; }
    uint32_t *a = malloc(sizeof(uint32_t) * n);
    int cap = 1; while (cap < 2 * n) cap <<= 1;
    uint32_t *keys = malloc(sizeof(uint32_t) * cap), *vals = malloc(sizeof(uint32_t) * cap);
    if (!a || !keys || !vals) { fprintf(stderr, "out of memory\n"); return 1; }
    uint64_t checksum = 0, found = 0;
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < n; i++) a[i] = (uint32_t)(next() >> 32) % (uint32_t)(4 * n);
        quick(a, n);
        for (int i = 1; i < n; i++) if (a[i - 1] > a[i]) { printf("unsorted\n"); return 1; }
        for (int i = 0; i < n; i += 97) checksum = checksum * 31 + a[i];
        for (int i = 0; i < cap; i++) keys[i] = 0xFFFFFFFFu;
        for (int i = 0; i < n; i++) {
            uint32_t k = a[i], h = hash32(k) & (cap - 1);
            while (keys[h] != 0xFFFFFFFFu && keys[h] != k) h = (h + 1) & (cap - 1);
            if (keys[h] == k) vals[h]++; else { keys[h] = k; vals[h] = 1; }
        }
        for (int i = 0; i < n; i++) {
            uint32_t k = (uint32_t)(next() >> 32) % (uint32_t)(4 * n), h = hash32(k) & (cap - 1);
            while (keys[h] != 0xFFFFFFFFu && keys[h] != k) h = (h + 1) & (cap - 1);
            if (keys[h] == k) found += vals[h];
        }
    }
    printf("checksum %llu\nfound %llu\n", (unsigned long long)checksum, (unsigned long long)found);
    free(a); free(keys); free(vals);
    return 0;
}
