/* stats.c — see stats.h. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>

#include "util/util.h"

void add(samples *s, double v)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->v = xrealloc(s->v, s->cap * sizeof *s->v);
	}
	s->v[s->n++] = v;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of the sorted samples. */
double pct(samples *s, double p)
{
	if (!s->n)
		return 0;
	qsort(s->v, s->n, sizeof *s->v, cmp_d);
	size_t k = (size_t)(p / 100.0 * (double)s->n + 0.999999);
	if (k < 1)
		k = 1;
	if (k > s->n)
		k = s->n;
	return s->v[k - 1];
}

double median(samples *s)
{
	if (!s->n)
		return 0;
	qsort(s->v, s->n, sizeof *s->v, cmp_d);
	return s->n % 2 ? s->v[s->n / 2] : (s->v[s->n / 2 - 1] + s->v[s->n / 2]) / 2;
}

/* Distribution-free 95 % interval of the median (order statistics at
 * n/2 -+ 0.98 sqrt(n)): tells a real difference from noise. */
void median_ci(samples *s, double *lo, double *hi)
{
	*lo = *hi = 0;
	if (s->n < 6)
		return;
	qsort(s->v, s->n, sizeof *s->v, cmp_d);
	double half = 0.98 * sqrt((double)s->n);
	size_t j = (size_t)((double)s->n / 2 - half), k = (size_t)((double)s->n / 2 + 1 + half + 0.999999);
	if (j < 1)
		j = 1;
	if (k > s->n)
		k = s->n;
	*lo = s->v[j - 1];
	*hi = s->v[k - 1];
}

size_t count_below(const samples *s, double x)
{
	size_t c = 0;
	for (size_t i = 0; i < s->n; i++)
		c += s->v[i] < x;
	return c;
}
