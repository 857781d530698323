#include "compare_chart.h"

#include <stdio.h>
#include <string.h>

#if REPLAY_HAVE_CAIRO

#include <cairo.h>
#include <cairo-svg.h>
#if REPLAY_HAVE_FONTCONFIG
#include <fontconfig/fontconfig.h>
#endif

enum { W = 960, H = 440, TOP = 80, BOTTOM = 70, GAP = 70, LEFT = 60 };

static const double colours[][3] = {{0.12, 0.40, 0.75}, {0.55, 0.72, 0.92}, {0.90, 0.45, 0.10},
                                    {0.98, 0.75, 0.50}, {0.20, 0.60, 0.25}};

static void text_at(cairo_t *cr, double x, double y, const char *s, double align)
{
    cairo_text_extents_t te;
    cairo_text_extents(cr, s, &te);
    cairo_move_to(cr, x - te.width * align, y);
    cairo_show_text(cr, s);
}

static void bar(cairo_t *cr, int colour, double x, double w, double y0, double y1)
{
    cairo_set_source_rgb(cr, colours[colour][0], colours[colour][1], colours[colour][2]);
    cairo_rectangle(cr, x, y1, w, y0 - y1);
    cairo_fill(cr);
}

/* One panel at x0, width pw: value(bar i, series k); stacked or side by side; the axis from 0
 * to fixed_max, or when that is 0 to the largest value (the largest sum when stacked). */
static void panel(cairo_t *cr, double x0, double pw, const char *title, const char *unit,
                  double fixed_max, const compare_bar *bars, size_t n, int stacked, int series,
                  const int *colour, const char *const *names, double (*value)(const compare_bar *, int))
{
    double max = 0, y0 = H - BOTTOM, ph = H - TOP - BOTTOM, gw = pw / (double)n;
    char buf[64];
    size_t i;
    int k;
    for (i = 0; i < n; i++) {
        double sum = 0;
        for (k = 0; k < series; k++) {
            double v = value(&bars[i], k);
            sum += v;
            if (v > max)
                max = v;
        }
        if (stacked && sum > max)
            max = sum;
    }
    if (fixed_max > 0)
        max = fixed_max;
    if (max <= 0)
        max = 1;
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_font_size(cr, 13);
    text_at(cr, x0 + pw / 2, TOP - 28, title, 0.5);
    cairo_set_font_size(cr, 10);
    snprintf(buf, sizeof buf, "%.*f %s", max >= 100 ? 0 : 2, max, unit);
    text_at(cr, x0 - 4, TOP + 4, buf, 1.0);
    text_at(cr, x0 - 4, y0, "0", 1.0);
    for (i = 0; i < n; i++) {
        double gx = x0 + gw * (double)i + gw * 0.12, bw = gw * 0.76, base = y0;
        for (k = 0; k < series; k++) {
            double v = value(&bars[i], k), h = ph * v / max;
            if (stacked) {
                bar(cr, colour[k], gx, bw, base, base - h);
                base -= h;
            } else {
                bar(cr, colour[k], gx + bw / series * k, bw / series, y0, y0 - h);
            }
        }
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_save(cr);
        cairo_move_to(cr, gx + bw / 2 - 3, y0 + 8);
        cairo_rotate(cr, 0.6);
        cairo_show_text(cr, bars[i].policy);
        cairo_restore(cr);
    }
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 1);
    cairo_move_to(cr, x0, TOP);
    cairo_line_to(cr, x0, y0);
    cairo_line_to(cr, x0 + pw, y0);
    cairo_stroke(cr);
    for (k = 0; k < series && series > 1; k++) {
        double lx = x0 + 8 + 70 * k;
        bar(cr, colour[k], lx, 10, TOP - 4, TOP - 14);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, lx + 14, TOP - 5, names[k], 0.0);
    }
}

static double hit(const compare_bar *b, int k) { return 100 * (k ? b->hit_g2 : b->hit_g1); }
static double ttft(const compare_bar *b, int k) { return k ? b->ttft_p99 : b->ttft_p50; }
static double tput(const compare_bar *b, int k) { (void)k; return b->output_tps; }

/* The one cairo setup of both charts: a W x H surface, SVG or PNG by path's extension, white,
 * the title on top; draw(cr, ctx) adds the rest. 0, or -1 after a message. */
static int write_chart(const char *path, const char *title, void (*draw)(cairo_t *, const void *),
                       const void *ctx)
{
    size_t len = strlen(path);
    int png = len > 4 && strcmp(path + len - 4, ".png") == 0;
    cairo_surface_t *s;
    cairo_status_t st;
    cairo_t *cr;

    if (!png && !(len > 4 && strcmp(path + len - 4, ".svg") == 0)) {
        fprintf(stderr, "kvreg-replay: --plot %s: the name must end in .svg or .png\n", path);
        return -1;
    }
    s = png ? cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, H)
            : cairo_svg_surface_create(path, W, H);
    cr = cairo_create(s);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_font_size(cr, 14);
    text_at(cr, W / 2.0, 18, title, 0.5);
    draw(cr, ctx);
    cairo_destroy(cr);
    st = png ? cairo_surface_write_to_png(s, path) : CAIRO_STATUS_SUCCESS;
    cairo_surface_finish(s);
    if (st == CAIRO_STATUS_SUCCESS)
        st = cairo_surface_status(s);
    cairo_surface_destroy(s);
    /* as chart.c: give back cairo's and fontconfig's caches so leak checkers see a clean exit */
    cairo_debug_reset_static_data();
#if REPLAY_HAVE_FONTCONFIG
    FcFini();
#endif
    if (st != CAIRO_STATUS_SUCCESS) {
        fprintf(stderr, "kvreg-replay: --plot %s: %s\n", path, cairo_status_to_string(st));
        return -1;
    }
    return 0;
}

typedef struct bars_ctx {
    const compare_bar *bars;
    size_t n;
} bars_ctx;

static void draw_bars(cairo_t *cr, const void *ctx)
{
    static const int hit_colours[] = {0, 1}, ttft_colours[] = {2, 3}, tput_colours[] = {4};
    static const char *const hit_names[] = {"G1", "G2"}, *const ttft_names[] = {"p50", "p99"};
    const bars_ctx *b = ctx;
    double pw = (W - LEFT - 2 * GAP - 20) / 3.0;
    panel(cr, LEFT, pw, "hit rate by blocks", "%", 100, b->bars, b->n, 1, 2, hit_colours, hit_names, hit);
    panel(cr, LEFT + pw + GAP, pw, "TTFT (timing model)", "s", 0, b->bars, b->n, 0, 2, ttft_colours,
          ttft_names, ttft);
    panel(cr, LEFT + 2 * (pw + GAP), pw, "output throughput", "tok/s", 0, b->bars, b->n, 0, 1,
          tput_colours, NULL, tput);
}

int compare_chart_write(const char *path, const char *title, const compare_bar *bars, size_t n)
{
    bars_ctx ctx;
    ctx.bars = bars;
    ctx.n = n;
    return write_chart(path, title, draw_bars, &ctx);
}

/* --sweep-workers: lines against the worker count, evenly spaced (the counts are usually
 * doublings). */
typedef struct sweep_ctx {
    const compare_sweep_point *pts;
    size_t n_counts, n_policies;
} sweep_ctx;

static const double line_colours[][3] = {{0.12, 0.40, 0.75}, {0.90, 0.45, 0.10}, {0.20, 0.60, 0.25},
                                         {0.75, 0.15, 0.20}, {0.50, 0.30, 0.70}, {0.45, 0.45, 0.45}};

static double sweep_hit(const compare_sweep_point *p) { return 100 * p->hit; }
static double sweep_ttft(const compare_sweep_point *p) { return p->ttft_p99; }

static void line_panel(cairo_t *cr, double x0, double pw, const char *title, const char *unit,
                       double fixed_max, const sweep_ctx *c, double (*value)(const compare_sweep_point *))
{
    double max = fixed_max, y0 = H - BOTTOM, ph = H - TOP - BOTTOM;
    double step = c->n_counts > 1 ? pw / (double)(c->n_counts - 1) : 0;
    char buf[64];
    size_t i, k;
    if (max <= 0)
        for (i = 0; i < c->n_counts * c->n_policies; i++)
            if (value(&c->pts[i]) > max)
                max = value(&c->pts[i]);
    if (max <= 0)
        max = 1;
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_font_size(cr, 13);
    text_at(cr, x0 + pw / 2, TOP - 28, title, 0.5);
    cairo_set_font_size(cr, 10);
    snprintf(buf, sizeof buf, "%.*f %s", max >= 100 ? 0 : 2, max, unit);
    text_at(cr, x0 - 4, TOP + 4, buf, 1.0);
    text_at(cr, x0 - 4, y0, "0", 1.0);
    for (i = 0; i < c->n_counts; i++) {
        snprintf(buf, sizeof buf, "%u", c->pts[i * c->n_policies].workers);
        text_at(cr, x0 + step * (double)i + (c->n_counts > 1 ? 0 : pw / 2), y0 + 16, buf, 0.5);
    }
    text_at(cr, x0 + pw / 2, y0 + 34, "workers", 0.5);
    cairo_set_line_width(cr, 2);
    for (k = 0; k < c->n_policies; k++) {
        const double *rgb = line_colours[k % (sizeof line_colours / sizeof line_colours[0])];
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        for (i = 0; i < c->n_counts; i++) {
            double x = x0 + step * (double)i + (c->n_counts > 1 ? 0 : pw / 2);
            double y = y0 - ph * value(&c->pts[i * c->n_policies + k]) / max;
            if (i == 0)
                cairo_move_to(cr, x, y);
            else
                cairo_line_to(cr, x, y);
        }
        cairo_stroke(cr);
        for (i = 0; i < c->n_counts; i++) { /* a dot per point: one count alone still shows */
            double x = x0 + step * (double)i + (c->n_counts > 1 ? 0 : pw / 2);
            double y = y0 - ph * value(&c->pts[i * c->n_policies + k]) / max;
            cairo_arc(cr, x, y, 3, 0, 6.2832);
            cairo_fill(cr);
        }
    }
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 1);
    cairo_move_to(cr, x0, TOP);
    cairo_line_to(cr, x0, y0);
    cairo_line_to(cr, x0 + pw, y0);
    cairo_stroke(cr);
}

static void draw_sweep(cairo_t *cr, const void *ctx)
{
    const sweep_ctx *c = ctx;
    double pw = (W - LEFT - GAP - 140) / 2.0;
    size_t k;
    line_panel(cr, LEFT, pw, "TTFT p99 (timing model)", "s", 0, c, sweep_ttft);
    line_panel(cr, LEFT + pw + GAP, pw, "hit rate by blocks", "%", 100, c, sweep_hit);
    cairo_set_font_size(cr, 11);
    for (k = 0; k < c->n_policies; k++) { /* the legend, right of the panels */
        const double *rgb = line_colours[k % (sizeof line_colours / sizeof line_colours[0])];
        double lx = LEFT + 2 * pw + GAP + 24, ly = TOP + 16.0 * (double)k;
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        cairo_rectangle(cr, lx, ly - 9, 14, 10);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, lx + 18, ly, c->pts[k].policy, 0.0);
    }
}

int compare_sweep_chart_write(const char *path, const char *title, const compare_sweep_point *pts,
                              size_t n_counts, size_t n_policies)
{
    sweep_ctx ctx;
    ctx.pts = pts;
    ctx.n_counts = n_counts;
    ctx.n_policies = n_policies;
    return write_chart(path, title, draw_sweep, &ctx);
}

#else /* !REPLAY_HAVE_CAIRO */

int compare_chart_write(const char *path, const char *title, const compare_bar *bars, size_t n)
{
    (void)title, (void)bars, (void)n;
    fprintf(stderr, "kvreg-replay: cannot write %s: built without cairo (libcairo2-dev)\n", path);
    return -1;
}

int compare_sweep_chart_write(const char *path, const char *title, const compare_sweep_point *pts,
                              size_t n_counts, size_t n_policies)
{
    (void)title, (void)pts, (void)n_counts, (void)n_policies;
    fprintf(stderr, "kvreg-replay: cannot write %s: built without cairo (libcairo2-dev)\n", path);
    return -1;
}

#endif
