/* Pointer chasing on a random graph: build an adjacency list (CSR), run BFS from several roots and a
 * linked-list walk through a random permutation.  Usage: graph NODES DEGREE ROOTS   (MIT licence)
 * Output: exact integers (compare exactly). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t state = 0x2545F4914F6CDD1DULL;
static uint32_t next(uint32_t bound) { state ^= state << 13; state ^= state >> 7; state ^= state << 17; return (uint32_t)(state % bound); }

typedef struct node { struct node *next; uint32_t value; } node;

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 400000, deg = argc > 2 ? atoi(argv[2]) : 6, roots = argc > 3 ? atoi(argv[3]) : 12;
    if (n < 16 || deg < 1 || roots < 1) { fprintf(stderr, "usage: graph NODES DEGREE ROOTS\n"); return 2; }
    size_t m = (size_t)n * deg;
    uint32_t *src = malloc(sizeof(uint32_t) * m), *dst = malloc(sizeof(uint32_t) * m);
    uint32_t *start = calloc(n + 1, sizeof(uint32_t)), *adj = malloc(sizeof(uint32_t) * m);
    int32_t *dist = malloc(sizeof(int32_t) * n); uint32_t *queue = malloc(sizeof(uint32_t) * n);
    node *nodes = malloc(sizeof(node) * n); uint32_t *perm = malloc(sizeof(uint32_t) * n);
    if (!src || !dst || !start || !adj || !dist || !queue || !nodes || !perm) { fprintf(stderr, "out of memory\n"); return 1; }
    for (size_t e = 0; e < m; e++) { src[e] = next(n); dst[e] = (e % 4 == 0) ? (src[e] + 1) % n : next(n); start[src[e] + 1]++; }
    for (int i = 0; i < n; i++) start[i + 1] += start[i];
    uint32_t *fill = malloc(sizeof(uint32_t) * n);
    for (int i = 0; i < n; i++) fill[i] = start[i];
    for (size_t e = 0; e < m; e++) adj[fill[src[e]]++] = dst[e];
    uint64_t reached = 0, dist_sum = 0;
    for (int r = 0; r < roots; r++) {
        for (int i = 0; i < n; i++) dist[i] = -1;
        uint32_t root = next(n), head = 0, tail = 0;
        dist[root] = 0; queue[tail++] = root;
        while (head < tail) {
            uint32_t u = queue[head++];
            for (uint32_t k = start[u]; k < start[u + 1]; k++) {
                uint32_t w = adj[k];
                if (dist[w] < 0) { dist[w] = dist[u] + 1; queue[tail++] = w; }
            }
        }
        reached += tail;
        for (int i = 0; i < n; i++) if (dist[i] > 0) dist_sum += (uint64_t)dist[i];
    }
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = n - 1; i > 0; i--) { uint32_t j = next(i + 1), t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    for (int i = 0; i < n; i++) { nodes[perm[i]].next = &nodes[perm[(i + 1) % n]]; nodes[perm[i]].value = perm[i] * 2654435761u; }
    uint64_t walk = 0; node *p = &nodes[perm[0]];
    for (int lap = 0; lap < roots; lap++) for (int i = 0; i < n; i++) { walk += p->value ^ (walk >> 7); p = p->next; }
    printf("reached %llu\ndist_sum %llu\nwalk %llu\n", (unsigned long long)reached, (unsigned long long)dist_sum, (unsigned long long)walk);
    free(src); free(dst); free(start); free(adj); free(dist); free(queue); free(nodes); free(perm); free(fill);
    return 0;
}
