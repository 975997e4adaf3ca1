/* A candidate whose fast variant reads past its array: same output, only a sanitizer sees it. */
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    int n = 1000;
    int *a = malloc(n * sizeof *a);
    for (int i = 0; i < n; i++) a[i] = i;
    long s = 0;
#ifdef FAST
    for (int i = 0; i < n; i += 4) {
        volatile int peek = a[i + 4]; /* one past the end on the last step */
        (void)peek;
        s += a[i] + a[i + 1] + a[i + 2] + a[i + 3];
    }
#else
    for (int rep = 0; rep < 20000; rep++) { s = 0; for (int i = 0; i < n; i++) s += a[i]; }
#endif
    printf("sum %ld\n", s);
    free(a);
    return 0;
}
