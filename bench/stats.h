/* stats.h — the sample statistics bench_run and bench_guest print: a growing
 * sample set, nearest-rank percentiles, the median with its distribution-free
 * 95 % interval, and counts for paired comparisons. */
#ifndef BRIG_BENCH_STATS_H
#define BRIG_BENCH_STATS_H

#include <stddef.h>

typedef struct samples {
	double *v;
	size_t n, cap;
} samples;

void add(samples *s, double v);
/* Nearest-rank percentile (sorts the samples). */
double pct(samples *s, double p);
double median(samples *s);
/* Distribution-free 95 % interval of the median (order statistics at
 * n/2 -+ 0.98 sqrt(n)): tells a real difference from noise. 0, 0 below six
 * samples. */
void median_ci(samples *s, double *lo, double *hi);
/* How many samples are below x. */
size_t count_below(const samples *s, double x);

#endif
