/* names.c — the nearest name to a typo ("did you mean ...?"), for every surface that takes
 * names: KV configs and methods (src/kvspec), command-line options (tools/). */
#include <string.h>

#include "veloxquant.h"

/* Edit distance of a and b counting a swap of adjacent characters as one edit (optimal string
 * alignment); both < 64 chars, longer: a large value. */
static int edit_distance(const char *a, const char *b) {
    const int na = (int)strlen(a), nb = (int)strlen(b);
    if (na >= 64 || nb >= 64) return 1000;
    int d[65][65];
    for (int i = 0; i <= na; i++) d[i][0] = i;
    for (int j = 0; j <= nb; j++) d[0][j] = j;
    for (int i = 1; i <= na; i++)
        for (int j = 1; j <= nb; j++) {
            int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[na][nb];
}

int vq_nearest_name(const char *name, const char *const *names, int n) {
    if (!name || !names) return -1;
    int best = -1, bd = 1000;
    for (int i = 0; i < n; i++) {
        if (!names[i]) continue;
        const int d = edit_distance(name, names[i]);
        if (d < bd) bd = d, best = i;
    }
    const int len = (int)strlen(name), lim = len <= 4 ? 1 : len / 3 + 1;
    return bd <= lim ? best : -1;
}
