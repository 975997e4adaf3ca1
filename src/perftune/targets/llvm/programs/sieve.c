/* Prime sieve, twin primes and a Collatz-length search.
 * Usage: sieve [LIMIT]   (written for perftune; MIT licence) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int collatz_length(unsigned long long v) {
    int steps = 0;
    while (v != 1) {
        v = (v & 1) ? 3 * v + 1 : v / 2;
        steps++;
    }
    return steps;
}

int main(int argc, char **argv) {
    int limit = argc > 1 ? atoi(argv[1]) : 2000000;
    if (limit < 10) limit = 10;
    char *composite = malloc((size_t)limit + 1);
    if (!composite) return 1;
    memset(composite, 0, (size_t)limit + 1);
    for (long i = 2; i * i <= limit; i++)
        if (!composite[i])
            for (long j = i * i; j <= limit; j += i) composite[j] = 1;
    long primes = 0, twins = 0, sum = 0;
    for (int i = 2; i <= limit; i++)
        if (!composite[i]) {
            primes++;
            sum += i;
            if (i + 2 <= limit && !composite[i + 2]) twins++;
        }
    int best = 0, best_n = 1;
    for (int i = 1; i < limit / 20; i++) {
        int len = collatz_length((unsigned long long)i);
        if (len > best) { best = len; best_n = i; }
    }
    printf("primes %ld\ntwins %ld\nsum %ld\ncollatz %d %d\n", primes, twins, sum, best_n, best);
    free(composite);
    return 0;
}
