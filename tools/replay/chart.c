#include "chart.h"

#include <stdio.h>
#include <string.h>

#include "cache.h"

#if REPLAY_HAVE_CAIRO

#include <cairo.h>
#include <cairo-svg.h>
#if REPLAY_HAVE_FONTCONFIG
#include <fontconfig/fontconfig.h>
#endif
#include <math.h>

#define PI 3.14159265358979323846

int chart_available(void)
{
    return 1;
}

enum { W = 760, H = 460, LEFT = 70, RIGHT = 30, TOP = 50, BOTTOM = 60 };

static double rate(uint64_t part, uint64_t whole)
{
    return whole ? (double)part / (double)whole : 0.0;
}

static void text_at(cairo_t *cr, double x, double y, const char *s, double align)
{
    cairo_text_extents_t te;
    cairo_text_extents(cr, s, &te);
    cairo_move_to(cr, x - te.width * align, y);
    cairo_show_text(cr, s);
}

static void human_tokens(double tokens, char *buf, size_t cap)
{
    if (tokens >= 1e6)
        snprintf(buf, cap, "%.3gM", tokens / 1e6);
    else if (tokens >= 1e3)
        snprintf(buf, cap, "%.3gk", tokens / 1e3);
    else
        snprintf(buf, cap, "%g", tokens);
}

/* x: log2 of the capacity in blocks over the finite points; "unlimited" sits one step past
 * the largest. y: hit rate by blocks, 0..100%. */
typedef struct axis {
    double lo, hi;  /* log2 of the smallest and largest finite G1 capacity */
    int unlimited;  /* a point at "unlimited" */
} axis;

static double x_for(const axis *a, uint64_t g1)
{
    double pw = W - LEFT - RIGHT;
    double l = g1 == CACHE_UNLIMITED ? a->hi + 1 : log2((double)g1);
    return LEFT + pw * (l - a->lo) / (a->hi + (a->unlimited ? 1 : 0) - a->lo);
}

static double y_for(uint64_t hits, uint64_t blocks)
{
    return TOP + (H - TOP - BOTTOM) * (1 - rate(hits, blocks));
}

static const double palette[][3] = {
    {0.12, 0.40, 0.75}, {0.90, 0.45, 0.10}, {0.20, 0.60, 0.25}, {0.70, 0.15, 0.20},
    {0.50, 0.30, 0.70}, {0.45, 0.35, 0.25},
};

/* One curve: hit rate (G1 hits, plus G2 hits when with_g2) of rows[0..n). */
static void curve(cairo_t *cr, const axis *a, const sweep_row *rows, size_t n, int with_g2,
                  int colour, int legend_row, const char *label)
{
    const double *c = palette[colour % (int)(sizeof palette / sizeof palette[0])];
    size_t i;
    cairo_set_source_rgb(cr, c[0], c[1], c[2]);
    cairo_set_line_width(cr, 2.5);
    for (i = 0; i < n; i++) {
        uint64_t hits = rows[i].hit_blocks_g1 + (with_g2 ? rows[i].hit_blocks_g2 : 0);
        if (i == 0)
            cairo_move_to(cr, x_for(a, rows[i].g1_blocks), y_for(hits, rows[i].blocks));
        else
            cairo_line_to(cr, x_for(a, rows[i].g1_blocks), y_for(hits, rows[i].blocks));
    }
    cairo_stroke(cr);
    for (i = 0; i < n; i++) {
        uint64_t hits = rows[i].hit_blocks_g1 + (with_g2 ? rows[i].hit_blocks_g2 : 0);
        cairo_arc(cr, x_for(a, rows[i].g1_blocks), y_for(hits, rows[i].blocks), 3.5, 0, 2 * PI);
        cairo_fill(cr);
    }
    cairo_set_font_size(cr, 12);
    cairo_rectangle(cr, LEFT + 12, TOP + 10 + 18 * legend_row, 14, 4);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    text_at(cr, LEFT + 32, TOP + 16 + 18 * legend_row, label, 0);
}

static void g2_label(uint64_t g2, char *buf, size_t cap)
{
    if (g2 == 0)
        snprintf(buf, cap, "G1 hits, no G2");
    else if (g2 == CACHE_UNLIMITED)
        snprintf(buf, cap, "G1 + G2 hits, G2 unlimited");
    else
        snprintf(buf, cap, "G1 + G2 hits, G2 %llu blocks", (unsigned long long)g2);
}

/* rows are sorted by G2 then G1 (sweep.c): each run of equal G2 is one curve. */
static void draw(cairo_t *cr, const char *title, const sweep_row *rows, size_t n,
                 uint32_t block_tokens)
{
    axis a = {1e300, 0, 0};
    double pw = W - LEFT - RIGHT, ph = H - TOP - BOTTOM;
    double max_rate = rate(rows[0].max_hit_blocks, rows[0].blocks);
    size_t i, k, first, groups = 0;
    char buf[64];

    for (i = 0; i < n; i++) {
        if (rows[i].g1_blocks == CACHE_UNLIMITED) {
            a.unlimited = 1;
        } else {
            double l = log2((double)rows[i].g1_blocks);
            a.lo = l < a.lo ? l : a.lo;
            a.hi = l > a.hi ? l : a.hi;
        }
        groups += i == 0 || rows[i].g2_blocks != rows[i - 1].g2_blocks;
    }
    if (a.lo > a.hi) /* only "unlimited" */
        a.lo = a.hi = 0;
    if (a.hi - a.lo < 1)
        a.hi = a.lo + 1;

    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);

    /* grid and y labels */
    cairo_set_font_size(cr, 11);
    cairo_set_line_width(cr, 1);
    for (k = 0; k <= 10; k += 2) {
        double y = TOP + ph * (1 - (double)k / 10);
        cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
        cairo_move_to(cr, LEFT, y);
        cairo_line_to(cr, LEFT + pw, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        snprintf(buf, sizeof buf, "%zu%%", k * 10);
        text_at(cr, LEFT - 8, y + 4, buf, 1.0);
    }
    /* x labels (the first curve has every G1 capacity): blocks, and tokens below */
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    for (i = 0; i < n && rows[i].g2_blocks == rows[0].g2_blocks; i++) {
        double x = x_for(&a, rows[i].g1_blocks);
        if (rows[i].g1_blocks == CACHE_UNLIMITED) {
            text_at(cr, x, TOP + ph + 16, "unlimited", 0.5);
        } else {
            snprintf(buf, sizeof buf, "%llu", (unsigned long long)rows[i].g1_blocks);
            text_at(cr, x, TOP + ph + 16, buf, 0.5);
            human_tokens((double)rows[i].g1_blocks * block_tokens, buf, sizeof buf);
            text_at(cr, x, TOP + ph + 30, buf, 0.5);
        }
    }
    cairo_set_font_size(cr, 12);
    text_at(cr, LEFT + pw / 2, H - 10, "G1 capacity: blocks (above), tokens (below); log scale",
            0.5);
    cairo_save(cr);
    cairo_translate(cr, 16, TOP + ph / 2);
    cairo_rotate(cr, -PI / 2);
    text_at(cr, 0, 0, "prefix-cache hit rate (blocks)", 0.5);
    cairo_restore(cr);
    cairo_set_font_size(cr, 14);
    text_at(cr, W / 2.0, 28, title, 0.5);

    /* the theoretical maximum (an infinite cache) */
    cairo_set_source_rgb(cr, 0.5, 0.5, 0.5);
    cairo_set_dash(cr, (const double[]){6, 4}, 2, 0);
    cairo_move_to(cr, LEFT, TOP + ph * (1 - max_rate));
    cairo_line_to(cr, LEFT + pw, TOP + ph * (1 - max_rate));
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    cairo_set_font_size(cr, 11);
    snprintf(buf, sizeof buf, "maximum %.1f%%", 100 * max_rate);
    text_at(cr, LEFT + pw - 4, TOP + ph * (1 - max_rate) - 6, buf, 1.0);

    if (groups == 1) {
        /* one G2 setting: its total and, with a G2, what G1 alone served */
        g2_label(rows[0].g2_blocks, buf, sizeof buf);
        curve(cr, &a, rows, n, 1, 0, 0, buf);
        if (rows[0].g2_blocks)
            curve(cr, &a, rows, n, 0, 1, 1, "of which G1 hits");
    } else {
        for (first = 0, k = 0; first < n; k++) {
            size_t end = first;
            while (end < n && rows[end].g2_blocks == rows[first].g2_blocks)
                end++;
            g2_label(rows[first].g2_blocks, buf, sizeof buf);
            curve(cr, &a, rows + first, end - first, 1, (int)k, (int)k, buf);
            first = end;
        }
    }
    /* axes */
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 1);
    cairo_move_to(cr, LEFT, TOP);
    cairo_line_to(cr, LEFT, TOP + ph);
    cairo_line_to(cr, LEFT + pw, TOP + ph);
    cairo_stroke(cr);
}

int chart_write(const char *path, const char *title, const sweep_row *rows, size_t n,
                uint32_t block_tokens)
{
    size_t len = strlen(path);
    int png = len > 4 && strcmp(path + len - 4, ".png") == 0;
    cairo_surface_t *s;
    cairo_status_t st;
    cairo_t *cr;

    if (!png && !(len > 4 && strcmp(path + len - 4, ".svg") == 0)) {
        fprintf(stderr, "kvreg-replay: --chart %s: the name must end in .svg or .png\n", path);
        return -1;
    }
    if (n == 0)
        return -1;
    s = png ? cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, H)
            : cairo_svg_surface_create(path, W, H);
    cr = cairo_create(s);
    draw(cr, title, rows, n, block_tokens);
    cairo_destroy(cr);
    st = png ? cairo_surface_write_to_png(s, path) : CAIRO_STATUS_SUCCESS;
    cairo_surface_finish(s);
    if (st == CAIRO_STATUS_SUCCESS)
        st = cairo_surface_status(s);
    cairo_surface_destroy(s);
    /* Give back cairo's font caches (drawn once per process, no other cairo user here), so
     * leak checkers (valgrind, LeakSanitizer) see a clean exit. */
    cairo_debug_reset_static_data();
#if REPLAY_HAVE_FONTCONFIG
    FcFini();
#endif
    if (st != CAIRO_STATUS_SUCCESS) {
        fprintf(stderr, "kvreg-replay: --chart %s: %s\n", path, cairo_status_to_string(st));
        return -1;
    }
    return 0;
}

#else /* !REPLAY_HAVE_CAIRO */

int chart_available(void)
{
    return 0;
}

int chart_write(const char *path, const char *title, const sweep_row *rows, size_t n,
                uint32_t block_tokens)
{
    (void)title, (void)rows, (void)n, (void)block_tokens;
    fprintf(stderr, "kvreg-replay: cannot write %s: built without cairo\n", path);
    return -1;
}

#endif
