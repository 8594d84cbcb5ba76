/* c-dense: a dense-network engine in C with a hand-written backward pass, speaking the
 * harness's process protocol (docs/process-protocol.md): one JSON object per line on stdin,
 * one answer per line on stdout, arrays in .npy files. Logs go to stderr.
 *
 * Built twice, once per dtype: -DREAL=float and -DREAL=double; it computes in REAL throughout.
 * Single-threaded: the `threads` of "start" sizes nothing here.
 * What it computes is docs/plugin-contract.md: dense layers y = act(x W + b), W (n_in, n_out);
 * softmax cross-entropy or MSE, mean-reduced; torch's SGD (momentum) and Adam.
 * Compile with -ffp-contract=off: a fused multiply-add would round differently from the
 * reference, and differently on different machines.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tgmath.h> /* exp, tanh, log, sqrt of a float compute in float */
#include <time.h>

#ifndef REAL
#define REAL float
#endif
#define DESCR (sizeof(REAL) == 4 ? "<f4" : "<f8")

/* ---- the engine's own allocations, counted (the protocol's allocated_bytes) ---- */

typedef union { size_t size; max_align_t align; } Header;
static size_t live_bytes, peak_live, allocated_bytes, allocations;

static void die(const char *what) { fprintf(stderr, "c-dense: %s\n", what); exit(1); }

static void *counted_calloc(size_t count, size_t size) {
    size_t bytes = count * size;
    Header *h = calloc(1, sizeof(Header) + bytes);
    if (!h) die("out of memory");
    h->size = bytes;
    live_bytes += bytes;
    allocated_bytes += bytes;
    allocations++;
    if (live_bytes > peak_live) peak_live = live_bytes;
    return h + 1;
}

static void counted_free(void *p) {
    if (!p) return;
    Header *h = (Header *)p - 1;
    live_bytes -= h->size;
    free(h);
}

/* ---- a small JSON reader: the messages are small, so a tree is fine ---- */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } JType;
typedef struct Json {
    JType type;
    double num;
    char *str;
    int n;
    char **keys;        /* objects */
    struct Json **items; /* arrays and objects */
} Json;

static const char *cur;
static char json_error[256];

static void skip(void) { while (*cur == ' ' || *cur == '\t' || *cur == '\r' || *cur == '\n') cur++; }

static char *parse_string(void) {
    size_t cap = 16, len = 0;
    char *s = malloc(cap);
    cur++; /* the opening quote */
    while (*cur && *cur != '"') {
        char c = *cur++;
        if (c == '\\') {
            c = *cur++;
            if (c == 'n') c = '\n'; else if (c == 't') c = '\t'; else if (c == 'r') c = '\r';
            else if (c == 'b') c = '\b'; else if (c == 'f') c = '\f';
            else if (c == 'u') { /* paths and names are ASCII; others become '?' */
                unsigned code = (unsigned)strtoul((char[5]){cur[0], cur[1], cur[2], cur[3], 0}, NULL, 16);
                c = code < 128 ? (char)code : '?';
                cur += 4;
            }
        }
        if (len + 2 > cap) s = realloc(s, cap *= 2);
        s[len++] = c;
    }
    if (*cur == '"') cur++;
    s[len] = 0;
    return s;
}

static Json *parse_value(void) {
    Json *v = calloc(1, sizeof(Json));
    skip();
    if (*cur == '{' || *cur == '[') {
        int object = *cur == '{';
        v->type = object ? J_OBJ : J_ARR;
        cur++;
        skip();
        while (*cur && *cur != (object ? '}' : ']')) {
            v->items = realloc(v->items, (size_t)(v->n + 1) * sizeof(Json *));
            if (object) {
                v->keys = realloc(v->keys, (size_t)(v->n + 1) * sizeof(char *));
                v->keys[v->n] = parse_string();
                skip();
                cur++; /* ':' */
            }
            v->items[v->n++] = parse_value();
            skip();
            if (*cur == ',') { cur++; skip(); }
        }
        if (*cur) cur++;
    } else if (*cur == '"') {
        v->type = J_STR;
        v->str = parse_string();
    } else if (!strncmp(cur, "true", 4) || !strncmp(cur, "false", 5)) {
        v->type = J_BOOL;
        v->num = *cur == 't';
        cur += *cur == 't' ? 4 : 5;
    } else if (!strncmp(cur, "null", 4)) {
        cur += 4;
    } else {
        char *end;
        v->type = J_NUM;
        v->num = strtod(cur, &end);
        if (end == cur) { snprintf(json_error, sizeof json_error, "bad JSON near %.20s", cur); cur += strlen(cur); }
        else cur = end;
    }
    return v;
}

static void json_free(Json *v) {
    if (!v) return;
    for (int i = 0; i < v->n; i++) {
        json_free(v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    free(v);
}

static Json *get(const Json *obj, const char *key) {
    if (obj && obj->type == J_OBJ)
        for (int i = 0; i < obj->n; i++)
            if (!strcmp(obj->keys[i], key)) return obj->items[i];
    return NULL;
}

/* ---- answers and errors: every failure is an {"error": ...} answer, never a crash ---- */

static char error_text[512];
#define FAIL(...) do { snprintf(error_text, sizeof error_text, __VA_ARGS__); return 0; } while (0)

static void answer_error(const char *text) {
    fputs("{\"error\": \"", stdout);
    for (const char *c = text; *c; c++) {
        if (*c == '"' || *c == '\\') putchar('\\');
        putchar(*c == '\n' ? ' ' : *c);
    }
    fputs("\"}\n", stdout);
    fflush(stdout);
}

static const char *text_of(const Json *obj, const char *key) {
    Json *v = get(obj, key);
    return v && v->type == J_STR ? v->str : NULL;
}

/* ---- .npy files: version 1 headers, C order, little-endian ---- */

/* Reads `path` into a new (uncounted: the door's, not the engine's) buffer of `count` elements
 * of `descr` ("<f4", "<f8", "<i8"); the shape's element count must be `count`. */
static void *npy_read(const char *path, const char *descr, size_t count, size_t item) {
    FILE *f = fopen(path, "rb");
    unsigned char start[10];
    char header[4096];
    if (!f) return NULL;
    if (fread(start, 1, 10, f) != 10 || memcmp(start, "\x93NUMPY", 6)) { fclose(f); return NULL; }
    size_t header_len = start[8] | (size_t)start[9] << 8;
    if (start[6] != 1) { /* versions 2 and 3: a four-byte length */
        unsigned char more[2];
        if (fread(more, 1, 2, f) != 2) { fclose(f); return NULL; }
        header_len |= (size_t)more[0] << 16 | (size_t)more[1] << 24;
    }
    if (header_len >= sizeof header || fread(header, 1, header_len, f) != header_len) { fclose(f); return NULL; }
    header[header_len] = 0;
    char want[32];
    snprintf(want, sizeof want, "'descr': '%s'", descr);
    char *shape = strstr(header, "'shape': (");
    if (!strstr(header, want) || !strstr(header, "'fortran_order': False") || !shape) { fclose(f); return NULL; }
    size_t elements = 1;
    for (char *p = shape + 10; *p && *p != ')';) {
        char *end;
        long dim = strtol(p, &end, 10);
        if (end == p) { p++; continue; }
        elements *= (size_t)dim;
        p = end;
    }
    void *data = malloc(count * item + 1);
    if (elements != count || fread(data, item, count, f) != count) { free(data); data = NULL; }
    fclose(f);
    return data;
}

static int npy_write(const char *path, const REAL *data, int rows, int cols, int two_d) {
    char dict[128], header[192];
    if (two_d) snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%d, %d), }", DESCR, rows, cols);
    else snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }", DESCR, cols);
    size_t len = strlen(dict), total = (10 + len + 1 + 63) / 64 * 64; /* aligned to 64 bytes */
    memcpy(header, "\x93NUMPY\x01\x00", 8);
    header[8] = (char)((total - 10) & 0xff);
    header[9] = (char)((total - 10) >> 8);
    memcpy(header + 10, dict, len);
    memset(header + 10 + len, ' ', total - 10 - len - 1);
    header[total - 1] = '\n';
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    size_t count = (size_t)rows * (size_t)cols;
    int ok = fwrite(header, 1, total, f) == total && fwrite(data, sizeof(REAL), count, f) == count;
    return fclose(f) == 0 && ok;
}

/* ---- the model ---- */

enum { ACT_NONE, ACT_RELU, ACT_TANH, ACT_SIGMOID };
enum { LOSS_CE, LOSS_MSE };
enum { OPT_SGD, OPT_ADAM };

typedef struct {
    int n_in, n_out, act;
    REAL *weight, *bias, *grad_weight, *grad_bias;
    REAL *state_weight[2], *state_bias[2]; /* SGD: velocity; Adam: m, v */
    REAL *out, *delta;                     /* (batch, n_out): activations, d loss / d out */
} Layer;

static Layer *layers;
static int n_layers, n_inputs, loss_kind, opt_kind, capacity, steps;
static double lr, momentum, beta1, beta2, eps;

static int parse_act(const Json *v, int *act) {
    const char *name = v && v->type == J_STR ? v->str : NULL;
    if (!name) *act = ACT_NONE;
    else if (!strcmp(name, "relu")) *act = ACT_RELU;
    else if (!strcmp(name, "tanh")) *act = ACT_TANH;
    else if (!strcmp(name, "sigmoid")) *act = ACT_SIGMOID;
    else FAIL("activation '%s' is not supported", name);
    return 1;
}

static int start(const Json *msg) {
    const Json *spec = get(msg, "spec"), *list = get(spec, "layers"), *opt = get(spec, "optimizer");
    const Json *weights = get(msg, "weights");
    const char *dtype = text_of(msg, "dtype"), *loss = text_of(spec, "loss");
    Json *protocol = get(msg, "protocol");
    if (!protocol || protocol->num != 1) FAIL("speaks protocol 1 only");
    if (!dtype || strcmp(dtype, sizeof(REAL) == 4 ? "float32" : "float64"))
        FAIL("this build computes in %s, not %s", sizeof(REAL) == 4 ? "float32" : "float64", dtype ? dtype : "?");
    if (!list || !opt || !weights || !loss) FAIL("'start' lacks spec, its layers, optimizer or loss, or weights");
    if (!strcmp(loss, "softmax_cross_entropy")) loss_kind = LOSS_CE;
    else if (!strcmp(loss, "mse")) loss_kind = LOSS_MSE;
    else FAIL("loss '%s' is not supported", loss);
    const char *opt_name = text_of(opt, "name");
    lr = get(opt, "lr")->num;
    if (opt_name && !strcmp(opt_name, "sgd")) {
        opt_kind = OPT_SGD;
        momentum = get(opt, "momentum")->num;
    } else if (opt_name && !strcmp(opt_name, "adam")) {
        opt_kind = OPT_ADAM;
        beta1 = get(opt, "betas")->items[0]->num;
        beta2 = get(opt, "betas")->items[1]->num;
        eps = get(opt, "eps")->num;
    } else FAIL("optimizer '%s' is not supported", opt_name ? opt_name : "?");
    n_layers = list->n;
    layers = counted_calloc((size_t)n_layers, sizeof(Layer));
    for (int i = 0; i < n_layers; i++) {
        Json *spec_layer = list->items[i];
        Layer *l = &layers[i];
        const char *kind = text_of(spec_layer, "kind");
        if (!kind || strcmp(kind, "dense")) FAIL("layer %d is %s: dense layers only", i, kind ? kind : "?");
        if (!parse_act(get(spec_layer, "act"), &l->act)) return 0;
        l->n_in = (int)get(spec_layer, "n_in")->num;
        l->n_out = (int)get(spec_layer, "n_out")->num;
        if (i == 0) n_inputs = l->n_in;
        size_t nw = (size_t)l->n_in * (size_t)l->n_out, nb = (size_t)l->n_out;
        l->weight = counted_calloc(nw, sizeof(REAL));
        l->bias = counted_calloc(nb, sizeof(REAL));
        l->grad_weight = counted_calloc(nw, sizeof(REAL));
        l->grad_bias = counted_calloc(nb, sizeof(REAL));
        for (int s = 0; s < (opt_kind == OPT_ADAM ? 2 : 1); s++) {
            l->state_weight[s] = counted_calloc(nw, sizeof(REAL));
            l->state_bias[s] = counted_calloc(nb, sizeof(REAL));
        }
        char name[64];
        REAL *targets[2] = {l->weight, l->bias};
        size_t counts[2] = {nw, nb};
        const char *suffixes[2] = {"weight", "bias"};
        for (int p = 0; p < 2; p++) {
            snprintf(name, sizeof name, "%d.%s", i, suffixes[p]);
            const char *path = text_of(weights, name);
            REAL *data = path ? npy_read(path, DESCR, counts[p], sizeof(REAL)) : NULL;
            if (!data) FAIL("cannot read weight %s (%s) as %s of %zu elements", name, path ? path : "no path", DESCR, counts[p]);
            memcpy(targets[p], data, counts[p] * sizeof(REAL));
            free(data);
        }
    }
    return 1;
}

/* Activations and deltas for `batch` examples; kept for the next call of the same size or less. */
static void reserve(int batch) {
    if (batch <= capacity) return;
    for (int i = 0; i < n_layers; i++) {
        counted_free(layers[i].out);
        counted_free(layers[i].delta);
        layers[i].out = counted_calloc((size_t)batch * (size_t)layers[i].n_out, sizeof(REAL));
        layers[i].delta = counted_calloc((size_t)batch * (size_t)layers[i].n_out, sizeof(REAL));
    }
    capacity = batch;
}

static void forward(const REAL *x, int batch) {
    const REAL *in = x;
    for (int li = 0; li < n_layers; li++) {
        Layer *l = &layers[li];
        int n_in = l->n_in, n_out = l->n_out;
        for (int i = 0; i < batch; i++) {
            REAL *row = l->out + (size_t)i * n_out;
            const REAL *x_row = in + (size_t)i * n_in;
            for (int j = 0; j < n_out; j++) row[j] = 0;
            for (int k = 0; k < n_in; k++) {
                REAL a = x_row[k];
                const REAL *w = l->weight + (size_t)k * n_out;
                for (int j = 0; j < n_out; j++) row[j] += a * w[j];
            }
            for (int j = 0; j < n_out; j++) {
                REAL z = row[j] + l->bias[j];
                row[j] = l->act == ACT_RELU ? (z > 0 ? z : 0)
                       : l->act == ACT_TANH ? tanh(z)
                       : l->act == ACT_SIGMOID ? 1 / (1 + exp(-z)) : z;
            }
        }
        in = l->out;
    }
}

/* The loss of the last layer's outputs, and its gradient with respect to them in the last
 * layer's delta (docs/plugin-contract.md#losses). */
static REAL loss_and_gradient(const void *targets, int batch) {
    Layer *last = &layers[n_layers - 1];
    int n = last->n_out;
    REAL total = 0;
    for (int i = 0; i < batch; i++) {
        const REAL *z = last->out + (size_t)i * n;
        REAL *d = last->delta + (size_t)i * n;
        if (loss_kind == LOSS_CE) {
            int64_t label = ((const int64_t *)targets)[i];
            REAL top = z[0], sum = 0;
            for (int j = 1; j < n; j++) if (z[j] > top) top = z[j];
            for (int j = 0; j < n; j++) sum += exp(z[j] - top);
            total += log(sum) + top - z[label];
            for (int j = 0; j < n; j++) d[j] = ((REAL)exp(z[j] - top) / sum - (j == label)) / batch;
        } else {
            const REAL *t = (const REAL *)targets + (size_t)i * n;
            for (int j = 0; j < n; j++) {
                REAL diff = z[j] - t[j];
                total += diff * diff;
                d[j] = 2 * diff / (REAL)(batch * n);
            }
        }
    }
    return total / (REAL)(loss_kind == LOSS_CE ? batch : batch * n);
}

/* Gradients of every parameter, from the last layer's delta back (the hand-written pass). */
static void backward(const REAL *x, int batch) {
    for (int li = n_layers - 1; li >= 0; li--) {
        Layer *l = &layers[li];
        int n_in = l->n_in, n_out = l->n_out;
        const REAL *in = li ? layers[li - 1].out : x;
        /* delta becomes d loss / d z, through the activation (relu: 0 at 0) */
        for (size_t i = 0; i < (size_t)batch * n_out; i++) {
            REAL y = l->out[i];
            if (l->act == ACT_RELU) l->delta[i] = y > 0 ? l->delta[i] : 0;
            else if (l->act == ACT_TANH) l->delta[i] *= 1 - y * y;
            else if (l->act == ACT_SIGMOID) l->delta[i] *= y * (1 - y);
        }
        memset(l->grad_weight, 0, (size_t)n_in * n_out * sizeof(REAL));
        memset(l->grad_bias, 0, (size_t)n_out * sizeof(REAL));
        for (int i = 0; i < batch; i++) {
            const REAL *d = l->delta + (size_t)i * n_out, *x_row = in + (size_t)i * n_in;
            for (int k = 0; k < n_in; k++) {
                REAL a = x_row[k];
                REAL *g = l->grad_weight + (size_t)k * n_out;
                for (int j = 0; j < n_out; j++) g[j] += a * d[j];
            }
            for (int j = 0; j < n_out; j++) l->grad_bias[j] += d[j];
        }
        if (li == 0) break;
        REAL *d_in = layers[li - 1].delta; /* d loss / d (the previous layer's output) */
        for (int i = 0; i < batch; i++) {
            const REAL *d = l->delta + (size_t)i * n_out;
            for (int k = 0; k < n_in; k++) {
                const REAL *w = l->weight + (size_t)k * n_out;
                REAL s = 0;
                for (int j = 0; j < n_out; j++) s += d[j] * w[j];
                d_in[(size_t)i * n_in + k] = s;
            }
        }
    }
}

/* One update of `n` values of p from their gradient g, as torch.optim does it (and the engine). */
static void update(REAL *p, const REAL *g, REAL *state[2], size_t n) {
    if (opt_kind == OPT_SGD) {
        REAL rate = (REAL)lr, mu = (REAL)momentum;
        for (size_t i = 0; i < n; i++) {
            REAL direction = g[i];
            if (momentum != 0) {
                state[0][i] = steps == 1 ? g[i] : mu * state[0][i] + g[i];
                direction = state[0][i];
            }
            p[i] -= direction * rate;
        }
        return;
    }
    double correction1 = 1 - pow(beta1, steps), correction2_sqrt = sqrt(1 - pow(beta2, steps));
    REAL b1 = (REAL)beta1, b2 = (REAL)beta2, one_b1 = (REAL)(1 - beta1), one_b2 = (REAL)(1 - beta2);
    REAL c2 = (REAL)correction2_sqrt, e = (REAL)eps, step = (REAL)(lr / correction1);
    REAL *m = state[0], *v = state[1];
    for (size_t i = 0; i < n; i++) {
        m[i] = m[i] * b1 + g[i] * one_b1;
        v[i] = v[i] * b2 + g[i] * g[i] * one_b2;
        REAL denominator = (REAL)sqrt(v[i]) / c2 + e;
        p[i] -= m[i] / denominator * step;
    }
}

static void optimizer_step(void) {
    steps++;
    for (int i = 0; i < n_layers; i++) {
        Layer *l = &layers[i];
        update(l->weight, l->grad_weight, l->state_weight, (size_t)l->n_in * l->n_out);
        update(l->bias, l->grad_bias, l->state_bias, (size_t)l->n_out);
    }
}

/* ---- the messages ---- */

typedef struct { REAL *x; void *y; int batch; } Batch;

static size_t file_elements(const char *path) { /* a batch's size, from its file's length */
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char start[10];
    size_t n = fread(start, 1, 10, f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    if (n != 10) return 0;
    size_t header = 10 + (start[8] | (size_t)start[9] << 8);
    return (size_t)(size - (long)header) / sizeof(REAL);
}

static int read_batch(const Json *msg, Batch *b, int with_targets) {
    const char *x_path = text_of(msg, "x"), *y_path = text_of(msg, "y");
    if (!x_path || (with_targets && !y_path)) FAIL("the message lacks 'x' or 'y'");
    b->batch = (int)(file_elements(x_path) / (size_t)n_inputs);
    b->x = npy_read(x_path, DESCR, (size_t)b->batch * n_inputs, sizeof(REAL));
    if (!b->x) FAIL("cannot read x (%s) as %s (batch, %d)", x_path, DESCR, n_inputs);
    b->y = NULL;
    if (with_targets) {
        int outputs = layers[n_layers - 1].n_out;
        b->y = loss_kind == LOSS_CE ? npy_read(y_path, "<i8", (size_t)b->batch, 8)
                                    : npy_read(y_path, DESCR, (size_t)b->batch * outputs, sizeof(REAL));
        if (!b->y) { free(b->x); FAIL("cannot read y (%s) for %d examples", y_path, b->batch); }
    }
    reserve(b->batch);
    return 1;
}

static void print_number(const char *key, double value) { /* JSON has no NaN; Python reads these */
    if (isnan(value)) printf("\"%s\": NaN", key);
    else if (isinf(value)) printf("\"%s\": %sInfinity", key, value < 0 ? "-" : "");
    else printf("\"%s\": %.17g", key, value);
}

static int write_outputs(const Json *msg, int batch) {
    const char *path = text_of(msg, "outputs");
    Layer *last = &layers[n_layers - 1];
    if (!path || !npy_write(path, last->out, batch, last->n_out, 1)) FAIL("cannot write the outputs to %s", path ? path : "?");
    return 1;
}

static int train_step(const Json *msg) {
    static size_t region_start; /* live bytes when the first step began: the peak counts from it */
    if (steps == 0) region_start = peak_live = live_bytes;
    size_t bytes_before = allocated_bytes, count_before = allocations;
    Batch b;
    if (!read_batch(msg, &b, 1)) return 0; /* sizes the activations on first use: counted */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    forward(b.x, b.batch);
    REAL loss = loss_and_gradient(b.y, b.batch);
    backward(b.x, b.batch);
    optimizer_step();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    free(b.x);
    free(b.y);
    if (!write_outputs(msg, b.batch)) return 0;
    printf("{");
    print_number("loss", (double)loss);
    printf(", \"seconds\": %.9f, \"allocated_bytes\": %zu, \"allocations\": %zu, \"peak_bytes\": %zu}\n",
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec),
           allocated_bytes - bytes_before, allocations - count_before, peak_live - region_start);
    return 1;
}

static int predict(const Json *msg) {
    Batch b;
    if (!read_batch(msg, &b, 0)) return 0;
    forward(b.x, b.batch);
    free(b.x);
    if (!write_outputs(msg, b.batch)) return 0;
    printf("{}\n");
    return 1;
}

/* "gradients" (forward and backward on a batch, no update) or "weights": one file per name. */
static int parameters(const Json *msg, int gradients) {
    const Json *paths = get(msg, "paths");
    if (gradients) {
        Batch b;
        if (!read_batch(msg, &b, 1)) return 0;
        forward(b.x, b.batch);
        loss_and_gradient(b.y, b.batch);
        backward(b.x, b.batch);
        free(b.x);
        free(b.y);
    }
    for (int i = 0; i < n_layers; i++) {
        Layer *l = &layers[i];
        char name[64];
        snprintf(name, sizeof name, "%d.weight", i);
        const char *path = text_of(paths, name);
        if (!path || !npy_write(path, gradients ? l->grad_weight : l->weight, l->n_in, l->n_out, 1)) FAIL("cannot write %s", name);
        snprintf(name, sizeof name, "%d.bias", i);
        path = text_of(paths, name);
        if (!path || !npy_write(path, gradients ? l->grad_bias : l->bias, 1, l->n_out, 0)) FAIL("cannot write %s", name);
    }
    printf("{}\n");
    return 1;
}

int main(void) {
    static char line[1 << 16];
    int started = 0;
    while (fgets(line, sizeof line, stdin)) {
        cur = line;
        json_error[0] = 0;
        Json *msg = parse_value();
        const char *op = text_of(msg, "op");
        int ok = 1;
        if (json_error[0]) { snprintf(error_text, sizeof error_text, "%s", json_error); ok = 0; }
        else if (!op) { snprintf(error_text, sizeof error_text, "a message without 'op'"); ok = 0; }
        else if (!strcmp(op, "stop")) { json_free(msg); break; }
        else if (!strcmp(op, "start")) {
            if (started) { snprintf(error_text, sizeof error_text, "'start' twice"); ok = 0; }
            else if ((ok = start(msg))) { started = 1; printf("{}\n"); }
        } else if (!started) { snprintf(error_text, sizeof error_text, "'%s' before 'start'", op); ok = 0; }
        else if (!strcmp(op, "train_step")) ok = train_step(msg);
        else if (!strcmp(op, "predict")) ok = predict(msg);
        else if (!strcmp(op, "gradients")) ok = parameters(msg, 1);
        else if (!strcmp(op, "weights")) ok = parameters(msg, 0);
        else { snprintf(error_text, sizeof error_text, "unknown op '%s'", op); ok = 0; }
        if (!ok) answer_error(error_text);
        fflush(stdout);
        json_free(msg);
    }
    return 0;
}
