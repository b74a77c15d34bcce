/*__banner__*/
/*
 * Builtins: the operators whose output size depends on the data (NonZero, Compress,
 * Unique, NonMaxSuppression), sorting (TopK, Sort, ArgSort: TVM's kernels would look up
 * tvm.contrib.sort at run time), the index check, the check of a shape parameter read at
 * run time, and the outputs of a recurrence over a sequence of run-time length. The first
 * kind writes into a buffer
 * sized for the worst case, laid out compactly as the actual shape would be (the tail is
 * zeroed), and stores the actual extent in an int64[1] tensor. They take the kernels'
 * calling convention, so the step table calls them alike.
 * This file is the same for every model; the linker drops what a model does not call, and a
 * model that calls none compiles none of it (__PREFIX___CALLS_BUILTINS).
 */
#include <math.h>
#include <string.h>

#include "__prefix___internal.h"

#if __PREFIX___CALLS_BUILTINS

static DLTensor* __prefix___arg_tensor(void* args, int index) {
  return (DLTensor*)((TVMFFIAny*)args)[index].v_ptr;
}

static size_t __prefix___element_bytes(const DLTensor* tensor) {
  return ((size_t)tensor->dtype.bits + 7u) / 8u;
}

static int64_t __prefix___num_elements(const DLTensor* tensor) {
  int64_t count = 1;
  int32_t d;
  for (d = 0; d < tensor->ndim; ++d) count *= tensor->shape[d];
  return count;
}

/* The element's bits, zero-extended. */
static uint64_t __prefix___bits(const DLTensor* tensor, int64_t index) {
  const unsigned char* at = (const unsigned char*)tensor->data + (size_t)index * __prefix___element_bytes(tensor);
  switch (tensor->dtype.bits) {
    case 16: { uint16_t v; memcpy(&v, at, sizeof(v)); return v; }
    case 32: { uint32_t v; memcpy(&v, at, sizeof(v)); return v; }
    case 64: { uint64_t v; memcpy(&v, at, sizeof(v)); return v; }
    default: return at[0];
  }
}

static int __prefix___is_float(const DLTensor* tensor) {
  return tensor->dtype.code == 2 || tensor->dtype.code == 4;  /* float, bfloat */
}

/* Nonzero test; for floats every bit but the sign counts, so -0.0 is zero and NaN is not. */
static int __prefix___is_nonzero(const DLTensor* tensor, int64_t index) {
  uint64_t bits = __prefix___bits(tensor, index);
  if (__prefix___is_float(tensor)) bits &= ~((uint64_t)1 << (tensor->dtype.bits - 1));
  return bits != 0;
}

static double __prefix___half_to_double(uint16_t h) {
  int exponent = (h >> 10) & 0x1f;
  double mantissa = (double)(h & 0x3ff);
  double magnitude;
  if (exponent == 0) {
    magnitude = mantissa / 16777216.0;  /* subnormal: m * 2^-24 */
  } else if (exponent == 31) {
    magnitude = mantissa != 0.0 ? (double)NAN : (double)INFINITY;
  } else {
    magnitude = (1.0 + mantissa / 1024.0) * (double)(1u << exponent) / 32768.0;
  }
  return (h & 0x8000) ? -magnitude : magnitude;
}

static double __prefix___float_value(const DLTensor* tensor, int64_t index) {
  uint64_t bits = __prefix___bits(tensor, index);
  if (tensor->dtype.code == 4) {  /* bfloat16: the top half of a float32 */
    uint32_t wide = (uint32_t)bits << 16;
    float value;
    memcpy(&value, &wide, sizeof(value));
    return value;
  }
  if (tensor->dtype.bits == 16) return __prefix___half_to_double((uint16_t)bits);
  if (tensor->dtype.bits == 32) {
    uint32_t narrow = (uint32_t)bits;
    float value;
    memcpy(&value, &narrow, sizeof(value));
    return value;
  }
  {
    double value;
    memcpy(&value, &bits, sizeof(value));
    return value;
  }
}

/* Order of two elements: -1, 0, 1. NaNs sort last and equal each other (as NumPy's unique). */
static int __prefix___compare_elements(const DLTensor* tensor, int64_t a, int64_t b) {
  if (__prefix___is_float(tensor)) {
    double x = __prefix___float_value(tensor, a), y = __prefix___float_value(tensor, b);
    int x_nan = x != x, y_nan = y != y;
    if (x_nan || y_nan) return x_nan - y_nan;
    return (x > y) - (x < y);
  }
  if (tensor->dtype.code == 0) {  /* signed: sign-extend from the element width */
    unsigned shift = 64u - tensor->dtype.bits;
    int64_t x = (int64_t)(__prefix___bits(tensor, a) << shift) >> shift;
    int64_t y = (int64_t)(__prefix___bits(tensor, b) << shift) >> shift;
    return (x > y) - (x < y);
  }
  {
    uint64_t x = __prefix___bits(tensor, a), y = __prefix___bits(tensor, b);
    return (x > y) - (x < y);
  }
}

typedef int (*__prefix___compare_fn)(const void* context, int64_t a, int64_t b);

/* Stable bottom-up merge sort of n item ids; temp holds n ids. */
static void __prefix___merge_sort(int64_t* items, int64_t* temp, int64_t n, __prefix___compare_fn compare,
                                    const void* context) {
  int64_t width;
  for (width = 1; width < n; width *= 2) {
    int64_t low;
    for (low = 0; low < n; low += 2 * width) {
      int64_t middle = low + width < n ? low + width : n;
      int64_t high = low + 2 * width < n ? low + 2 * width : n;
      int64_t a = low, b = middle, k = low;
      while (a < middle && b < high) temp[k++] = compare(context, items[b], items[a]) < 0 ? items[b++] : items[a++];
      while (a < middle) temp[k++] = items[a++];
      while (b < high) temp[k++] = items[b++];
    }
    memcpy(items, temp, (size_t)n * sizeof(int64_t));
  }
}

/* A tensor seen as [outer, n, inner]: slices are indexed along the middle axis. */
typedef struct __prefix___slices {
  const DLTensor* tensor;
  int64_t outer, n, inner;
} __prefix___slices;

/* Slices compare element by element in C order, as NumPy compares rows. */
static int __prefix___compare_slices(const void* context, int64_t a, int64_t b) {
  const __prefix___slices* s = (const __prefix___slices*)context;
  int64_t o, k;
  for (o = 0; o < s->outer; ++o) {
    for (k = 0; k < s->inner; ++k) {
      int order = __prefix___compare_elements(s->tensor, (o * s->n + a) * s->inner + k, (o * s->n + b) * s->inner + k);
      if (order != 0) return order;
    }
  }
  return 0;
}

static int __prefix___compare_ids(const void* context, int64_t a, int64_t b) {
  const int64_t* keys = (const int64_t*)context;
  return (keys[a] > keys[b]) - (keys[a] < keys[b]);
}

/* Copy slices picked[0..k) of src [outer, n, inner] to dst as a dense [outer, k, inner]. */
static void __prefix___gather_slices(const DLTensor* src, unsigned char* dst, const int64_t* picked, int64_t k,
                                       int64_t outer, int64_t n, int64_t inner) {
  size_t width = (size_t)inner * __prefix___element_bytes(src);
  const unsigned char* from = (const unsigned char*)src->data;
  int64_t o, j;
  for (o = 0; o < outer; ++o) {
    for (j = 0; j < k; ++j) {
      memcpy(dst + (size_t)(o * k + j) * width, from + (size_t)(o * n + picked[j]) * width, width);
    }
  }
}

static void __prefix___zero_tail(DLTensor* tensor, size_t used_bytes) {
  size_t total = (size_t)__prefix___num_elements(tensor) * __prefix___element_bytes(tensor);
  if (used_bytes < total) memset((unsigned char*)tensor->data + used_bytes, 0, total - used_bytes);
}

/* NonZero(x) -> indices int64[rank, k] (bound [rank, numel]), extent k. */
int32_t __prefix___builtin_nonzero(void* self, void* args, int32_t num_args, void* result) {
  const DLTensor* x = __prefix___arg_tensor(args, 0);
  DLTensor* indices = __prefix___arg_tensor(args, 1);
  int64_t* extent = (int64_t*)__prefix___arg_tensor(args, 2)->data;
  int64_t* out = (int64_t*)indices->data;
  int64_t total = __prefix___num_elements(x), k = 0, i, j = 0;
  (void)self;
  (void)num_args;
  (void)result;
  for (i = 0; i < total; ++i) k += __prefix___is_nonzero(x, i);
  for (i = 0; i < total; ++i) {
    int64_t rest = i;
    int32_t d;
    if (!__prefix___is_nonzero(x, i)) continue;
    for (d = x->ndim - 1; d >= 0; --d) {
      out[d * k + j] = rest % x->shape[d];
      rest /= x->shape[d];
    }
    ++j;
  }
  __prefix___zero_tail(indices, (size_t)(x->ndim * k) * sizeof(int64_t));
  extent[0] = k;
  return 0;
}

/* Compress(x [outer, n, inner], condition [c]) -> the slices where condition holds (bound
 * [outer, n, inner]), extent k. Conditions past n, or slices past c, select nothing. */
int32_t __prefix___builtin_compress(void* self, void* args, int32_t num_args, void* result) {
  const DLTensor* x = __prefix___arg_tensor(args, 0);
  const DLTensor* condition = __prefix___arg_tensor(args, 1);
  DLTensor* selected = __prefix___arg_tensor(args, 2);
  int64_t* extent = (int64_t*)__prefix___arg_tensor(args, 3)->data;
  int64_t outer = x->shape[0], n = x->shape[1], inner = x->shape[2];
  int64_t limit = condition->shape[0] < n ? condition->shape[0] : n;
  int64_t k = 0, i, o;
  size_t width = (size_t)inner * __prefix___element_bytes(x);
  (void)self;
  (void)num_args;
  (void)result;
  for (i = 0; i < limit; ++i) k += __prefix___is_nonzero(condition, i);
  for (o = 0; o < outer; ++o) {
    int64_t j = 0;
    for (i = 0; i < limit; ++i) {
      if (!__prefix___is_nonzero(condition, i)) continue;
      memcpy((unsigned char*)selected->data + (size_t)(o * k + j) * width,
             (const unsigned char*)x->data + (size_t)(o * n + i) * width, width);
      ++j;
    }
  }
  __prefix___zero_tail(selected, (size_t)(outer * k) * width);
  extent[0] = k;
  return 0;
}

/* Unique(x [outer, n, inner], sorted) -> values (bound [outer, n, inner]), first-occurrence
 * indices, inverse indices [n], counts, extent k; work holds 3n int64. Unsorted: in order of
 * first occurrence. */
int32_t __prefix___builtin_unique(void* self, void* args, int32_t num_args, void* result) {
  const DLTensor* x = __prefix___arg_tensor(args, 0);
  int64_t sorted = ((TVMFFIAny*)args)[1].v_int64;
  DLTensor* values = __prefix___arg_tensor(args, 2);
  DLTensor* first_tensor = __prefix___arg_tensor(args, 3);
  int64_t* first = (int64_t*)first_tensor->data;
  int64_t* inverse = (int64_t*)__prefix___arg_tensor(args, 4)->data;
  DLTensor* counts_tensor = __prefix___arg_tensor(args, 5);
  int64_t* counts = (int64_t*)counts_tensor->data;
  int64_t* extent = (int64_t*)__prefix___arg_tensor(args, 6)->data;
  int64_t* work = (int64_t*)__prefix___arg_tensor(args, 7)->data;
  __prefix___slices slices;
  int64_t n = x->shape[1], k = 0, i;
  int64_t *order = work, *temp = work + n, *group = work + 2 * n;
  (void)self;
  (void)num_args;
  (void)result;
  slices.tensor = x;
  slices.outer = x->shape[0];
  slices.n = n;
  slices.inner = x->shape[2];
  for (i = 0; i < n; ++i) order[i] = i;
  /* Stable: the first slice of each run of equal ones is its first occurrence. */
  __prefix___merge_sort(order, temp, n, __prefix___compare_slices, &slices);
  for (i = 0; i < n; ++i) {
    if (i == 0 || __prefix___compare_slices(&slices, order[i - 1], order[i]) != 0) {
      first[k] = order[i];
      counts[k] = 0;
      ++k;
    }
    counts[k - 1] += 1;
    group[order[i]] = k - 1;
  }
  if (!sorted) {
    /* Renumber the groups by first occurrence: order becomes the permutation, temp its inverse. */
    for (i = 0; i < k; ++i) order[i] = i;
    __prefix___merge_sort(order, temp, k, __prefix___compare_ids, first);
    for (i = 0; i < k; ++i) temp[order[i]] = i;
    for (i = 0; i < n; ++i) inverse[i] = temp[group[i]];
    for (i = 0; i < k; ++i) group[i] = first[order[i]];
    memcpy(first, group, (size_t)k * sizeof(int64_t));
    for (i = 0; i < k; ++i) group[i] = counts[order[i]];
    memcpy(counts, group, (size_t)k * sizeof(int64_t));
  } else {
    memcpy(inverse, group, (size_t)n * sizeof(int64_t));
  }
  __prefix___gather_slices(x, (unsigned char*)values->data, first, k, slices.outer, n, slices.inner);
  __prefix___zero_tail(values, (size_t)(slices.outer * k * slices.inner) * __prefix___element_bytes(x));
  __prefix___zero_tail(first_tensor, (size_t)k * sizeof(int64_t));
  __prefix___zero_tail(counts_tensor, (size_t)k * sizeof(int64_t));
  extent[0] = k;
  return 0;
}

/* One line of a tensor [outer, n, inner] along its middle axis: element j is at base + j * stride. */
typedef struct __prefix___line {
  const DLTensor* tensor;
  int64_t base, stride;
  int descending;
} __prefix___line;

/* Ascending or descending element order within a line; NaN counts as the largest value
 * (PyTorch's rule, and NumPy's for ascending sorts). */
static int __prefix___compare_in_line(const void* context, int64_t a, int64_t b) {
  const __prefix___line* line = (const __prefix___line*)context;
  int order = __prefix___compare_elements(line->tensor, line->base + a * line->stride, line->base + b * line->stride);
  return line->descending ? -order : order;
}

static void __prefix___store_index(DLTensor* tensor, int64_t at, int64_t value) {
  if (tensor->dtype.bits == 64) {
    ((int64_t*)tensor->data)[at] = value;
  } else {
    ((int32_t*)tensor->data)[at] = (int32_t)value;
  }
}

/* Float keys in a double each (read once, not at every comparison): NaN above everything,
 * equal to another NaN, as compare_elements orders them. */
typedef struct __prefix___keys {
  const double* keys;
  int descending;
} __prefix___keys;

static int __prefix___compare_keys(const void* context, int64_t a, int64_t b) {
  const __prefix___keys* k = (const __prefix___keys*)context;
  double x = k->keys[a], y = k->keys[b];
  int x_nan = x != x, y_nan = y != y;
  int order = (x_nan || y_nan) ? x_nan - y_nan : (x > y) - (x < y);
  return k->descending ? -order : order;
}

/* The first k of items 0..n-1 in the comparison's order into order[0..k), stably: a later
 * item goes before a kept one only when strictly before it. For small k (top-k of a
 * vocabulary): one pass, a few insertions. */
static void __prefix___select_first(int64_t* order, int64_t n, int64_t k, __prefix___compare_fn compare,
                                      const void* context) {
  int64_t kept = 0, j;
  for (j = 0; j < n; ++j) {
    int64_t at;
    if (kept == k && compare(context, j, order[k - 1]) >= 0) continue;
    at = kept < k ? kept++ : k - 1;
    while (at > 0 && compare(context, j, order[at - 1]) < 0) {
      order[at] = order[at - 1];
      --at;
    }
    order[at] = j;
  }
}

/* sort(x [outer, n, inner], k, descending) -> values, indices [outer, k, inner]: the first k
 * of each line in sorted order (TopK, Sort, ArgSort). Stable: equal values keep their order,
 * so the lower index comes first (ONNX TopK's rule). work holds 3n int64: the order, the
 * merge's scratch and, for floats, the line's keys. */
int32_t __prefix___builtin_sort(void* self, void* args, int32_t num_args, void* result) {
  const DLTensor* x = __prefix___arg_tensor(args, 0);
  int64_t k = ((TVMFFIAny*)args)[1].v_int64;
  DLTensor* values = __prefix___arg_tensor(args, 3);
  DLTensor* indices = __prefix___arg_tensor(args, 4);
  int64_t* work = (int64_t*)__prefix___arg_tensor(args, 5)->data;
  int64_t outer = x->shape[0], n = x->shape[1], inner = x->shape[2], o, i, j;
  size_t width = __prefix___element_bytes(x);
  double* keys = (double*)(work + 2 * n);
  int is_float = __prefix___is_float(x);
  __prefix___line line;
  __prefix___keys keyed;
  __prefix___compare_fn compare = is_float ? __prefix___compare_keys : __prefix___compare_in_line;
  const void* context = is_float ? (const void*)&keyed : (const void*)&line;
  (void)self;
  (void)num_args;
  (void)result;
  line.tensor = x;
  line.stride = inner;
  line.descending = ((TVMFFIAny*)args)[2].v_int64 != 0;
  keyed.keys = keys;
  keyed.descending = line.descending;
  for (o = 0; o < outer; ++o) {
    for (i = 0; i < inner; ++i) {
      line.base = o * n * inner + i;
      if (x->dtype.code == 2 && x->dtype.bits == 32) {  /* the common case, read directly */
        const float* data = (const float*)x->data + line.base;
        for (j = 0; j < n; ++j) keys[j] = data[j * inner];
      } else if (is_float) {
        for (j = 0; j < n; ++j) keys[j] = __prefix___float_value(x, line.base + j * inner);
      }
      if (k <= 64 && k < n) {
        __prefix___select_first(work, n, k, compare, context);
      } else {
        for (j = 0; j < n; ++j) work[j] = j;
        __prefix___merge_sort(work, work + n, n, compare, context);
      }
      for (j = 0; j < k; ++j) {
        int64_t to = (o * k + j) * inner + i;
        memcpy((unsigned char*)values->data + (size_t)to * width,
               (const unsigned char*)x->data + (size_t)(line.base + work[j] * inner) * width, width);
        __prefix___store_index(indices, to, work[j]);
      }
    }
  }
  return 0;
}

/* Element 0 of a scalar input as a double (any float or integer dtype). */
static double __prefix___scalar(const DLTensor* tensor) {
  if (__prefix___is_float(tensor)) return __prefix___float_value(tensor, 0);
  if (tensor->dtype.code == 0) {
    unsigned shift = 64u - tensor->dtype.bits;
    return (double)((int64_t)(__prefix___bits(tensor, 0) << shift) >> shift);
  }
  return (double)__prefix___bits(tensor, 0);
}

/* Box i of boxes [N, 4] as (x_min, y_min, x_max, y_max); corners [y1, x1, y2, x2] in either
 * order, or [x_center, y_center, width, height] when center_point_box is 1 (ONNX). */
static void __prefix___box(const DLTensor* boxes, int64_t first, int center, float* out) {
  float v[4];
  int c;
  for (c = 0; c < 4; ++c) v[c] = (float)__prefix___float_value(boxes, first + c);
  if (center) {
    out[0] = v[0] - v[2] / 2.0f;
    out[1] = v[1] - v[3] / 2.0f;
    out[2] = v[0] + v[2] / 2.0f;
    out[3] = v[1] + v[3] / 2.0f;
  } else {
    out[0] = v[1] < v[3] ? v[1] : v[3];
    out[1] = v[0] < v[2] ? v[0] : v[2];
    out[2] = v[1] < v[3] ? v[3] : v[1];
    out[3] = v[0] < v[2] ? v[2] : v[0];
  }
}

/* Whether two boxes overlap by more than the IoU threshold (as ONNX Runtime decides it: no
 * overlap, or a box without area, never suppresses). */
static int __prefix___overlaps(const float* a, const float* b, float threshold) {
  float left = a[0] > b[0] ? a[0] : b[0], top = a[1] > b[1] ? a[1] : b[1];
  float right = a[2] < b[2] ? a[2] : b[2], bottom = a[3] < b[3] ? a[3] : b[3];
  float area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
  float intersection, union_area;
  if (right <= left || bottom <= top || area_a <= 0.0f || area_b <= 0.0f) return 0;
  intersection = (right - left) * (bottom - top);
  union_area = area_a + area_b - intersection;
  if (union_area <= 0.0f) return 0;
  return intersection / union_area > threshold;
}

/* NonMaxSuppression(boxes [B, N, 4], scores [B, C, N], max_output_boxes_per_class,
 * iou_threshold, score_threshold, has_score_threshold, center_point_box) -> selected
 * [batch, class, box] rows (bound [B * C * min(N, max), 3]), extent; work holds 3n int64.
 * Per batch and class, greedily: the best remaining box whose score passes the threshold is
 * kept unless it overlaps a kept one by more than the IoU threshold. An IoU threshold
 * outside [0, 1] stops the run. */
int32_t __prefix___builtin_non_max_suppression(void* self, void* args, int32_t num_args, void* result) {
  const TVMFFIAny* any = (const TVMFFIAny*)args;
  const DLTensor* boxes = __prefix___arg_tensor(args, 0);
  const DLTensor* scores = __prefix___arg_tensor(args, 1);
  double max_per_class = __prefix___scalar(__prefix___arg_tensor(args, 2));
  float iou_threshold = (float)__prefix___scalar(__prefix___arg_tensor(args, 3));
  double score_threshold = __prefix___scalar(__prefix___arg_tensor(args, 4));
  int has_score_threshold = any[5].v_int64 != 0, center = any[6].v_int64 != 0;
  DLTensor* selected_tensor = __prefix___arg_tensor(args, 7);
  int64_t* selected = (int64_t*)selected_tensor->data;
  int64_t* extent = (int64_t*)__prefix___arg_tensor(args, 8)->data;
  int64_t* work = (int64_t*)__prefix___arg_tensor(args, 9)->data;
  int64_t batches = scores->shape[0], classes = scores->shape[1], n = scores->shape[2];
  int64_t capacity = selected_tensor->shape[0], limit, count = 0, b, c, i, j;
  int64_t *order = work, *kept = work + 2 * n;
  __prefix___line line;  /* one class's scores, best first; the sort is stable, so ties keep box order */
  (void)self;
  (void)num_args;
  (void)result;
  if (!(iou_threshold >= 0.0f && iou_threshold <= 1.0f)) {  /* ONNX Runtime refuses it too */
    const char* parts[1];
    parts[0] = "iou_threshold is outside [0, 1]";
    __prefix___backend_set_error("NonMaxSuppression", parts, 1);
    return __PREFIX___BUILTIN_INVALID_INPUT;
  }
  /* A NaN or negative maximum keeps nothing, as 0 does; the bound caps the rest. */
  limit = max_per_class > 0.0 ? (max_per_class < (double)n ? (int64_t)max_per_class : n) : 0;
  line.tensor = scores;
  line.stride = 1;
  line.descending = 1;
  for (b = 0; b < batches; ++b) {
    for (c = 0; c < classes; ++c) {
      int64_t candidates = 0, kept_count = 0;
      line.base = (b * classes + c) * n;
      for (i = 0; i < n && limit > 0; ++i) {
        double score = __prefix___float_value(scores, line.base + i);
        if (!has_score_threshold || score > score_threshold) order[candidates++] = i;
      }
      __prefix___merge_sort(order, work + n, candidates, __prefix___compare_in_line, &line);
      for (i = 0; i < candidates && kept_count < limit && count < capacity; ++i) {
        float box[4];
        int suppressed = 0;
        __prefix___box(boxes, (b * n + order[i]) * 4, center, box);
        for (j = 0; j < kept_count && !suppressed; ++j) {
          float other[4];
          __prefix___box(boxes, (b * n + kept[j]) * 4, center, other);
          suppressed = __prefix___overlaps(box, other, iou_threshold);
        }
        if (suppressed) continue;
        kept[kept_count++] = order[i];
        selected[count * 3] = b;
        selected[count * 3 + 1] = c;
        selected[count * 3 + 2] = order[i];
        ++count;
      }
    }
  }
  __prefix___zero_tail(selected_tensor, (size_t)(count * 3) * sizeof(int64_t));
  extent[0] = count;
  return 0;
}

/* Decimal text of value into text (room for 21 bytes); returns text. No stdio (bare metal). */
static const char* __prefix___decimal(int64_t value, char* text) {
  char digits[21];
  int n = 0, used = 0;
  uint64_t magnitude = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
  do {
    digits[n++] = (char)('0' + (int)(magnitude % 10u));
    magnitude /= 10u;
  } while (magnitude != 0u);
  if (value < 0) text[used++] = '-';
  while (n > 0) text[used++] = digits[--n];
  text[used] = '\0';
  return text;
}

/* check_indices(indices, site, bound_0 .. bound_{k-1}) -> checked: indices wrapped once as
 * ONNX and PyTorch do (a negative index counts from the end); an index still outside
 * [0, bound) stops the run before any kernel reads or writes through it. The last axis of
 * indices cycles through the k bounds (k = 1: every index has the same bound); a bound of -1
 * marks a column that holds no index (RoiAlign's box coordinates beside its batch index).
 * Float indices (RoiAlign's batch column) are not wrapped: 0 <= value < bound, NaN refused. */
int32_t __prefix___builtin_check_indices(void* self, void* args, int32_t num_args, void* result) {
  const TVMFFIAny* any = (const TVMFFIAny*)args;
  const DLTensor* indices = __prefix___arg_tensor(args, 0);
  const char* site = __prefix___builtin_texts[any[1].v_int64];
  int32_t period = num_args - 3;
  DLTensor* checked = __prefix___arg_tensor(args, num_args - 1);
  int64_t total = __prefix___num_elements(indices), i;
  int is_float = __prefix___is_float(indices);
  int wide = indices->dtype.bits == 64;
  (void)self;
  (void)result;
  for (i = 0; i < total; ++i) {
    int64_t bound = any[2 + i % period].v_int64;
    int64_t value, wrapped;
    int inside, finite = 1;
    if (is_float) {
      double real = __prefix___float_value(indices, i);
      inside = bound < 0 || (real >= 0.0 && real < (double)bound);
      finite = real == real && real > -9.2e18 && real < 9.2e18;
      value = finite ? (int64_t)real : 0;
      wrapped = value;
    } else {
      value = wide ? ((const int64_t*)indices->data)[i] : (int64_t)((const int32_t*)indices->data)[i];
      wrapped = value < 0 && bound >= 0 ? value + bound : value;
      inside = bound < 0 || (wrapped >= 0 && wrapped < bound);
    }
    if (!inside) {
      char value_text[22], bound_text[22], minus_text[22];
      const char* parts[8];
      parts[0] = "index ";
      parts[1] = finite ? __prefix___decimal(value, value_text) : "(not finite)";
      parts[2] = " is outside [";
      parts[3] = is_float ? "0" : __prefix___decimal(-bound, minus_text);
      parts[4] = ", ";
      parts[5] = __prefix___decimal(bound, bound_text);
      parts[6] = ")";
      parts[7] = period > 1 ? " (one coordinate of an index tuple)" : NULL;
      __prefix___backend_set_error(site, parts, 8);
      return __PREFIX___BUILTIN_INVALID_INPUT;
    }
    if (is_float) {
      memcpy((unsigned char*)checked->data + (size_t)i * __prefix___element_bytes(indices),
             (const unsigned char*)indices->data + (size_t)i * __prefix___element_bytes(indices),
             __prefix___element_bytes(indices));
    } else if (wide) {
      ((int64_t*)checked->data)[i] = wrapped;
    } else {
      ((int32_t*)checked->data)[i] = (int32_t)wrapped;
    }
  }
  return 0;
}

/* settle(choices, site) -> chosen: a shape parameter read at run time (onnx_settled.py) was
 * compared with each of the values the package was generated for; choices[k] is the variant
 * the k-th value selects, or -1 when the tensor does not hold it. The first match is chosen;
 * none stops the run before a kernel uses a result computed for other values. */
int32_t __prefix___builtin_settle(void* self, void* args, int32_t num_args, void* result) {
  const TVMFFIAny* any = (const TVMFFIAny*)args;
  const DLTensor* choices = __prefix___arg_tensor(args, 0);
  const char* site = __prefix___builtin_texts[any[1].v_int64];
  DLTensor* chosen = __prefix___arg_tensor(args, num_args - 1);
  int64_t total = __prefix___num_elements(choices), i;
  const char* parts[1];
  (void)self;
  (void)result;
  for (i = 0; i < total; ++i) {
    int64_t choice = ((const int64_t*)choices->data)[i];
    if (choice >= 0) {
      ((int64_t*)chosen->data)[0] = choice;
      return 0;
    }
  }
  parts[0] = "; the tensor given holds other values";
  __prefix___backend_set_error(site, parts, 1);
  return __PREFIX___BUILTIN_INVALID_INPUT;
}

/* The outputs of a recurrence unrolled to M steps over a sequence of run-time length L: its
 * passes' states come as G groups of M tensors (a pass's steps in its own order). Steps from
 * L on were skipped (the step table's guards) and are never read. */
static size_t __prefix___state_bytes(const DLTensor* out, int64_t states) {
  return states > 0 ? (size_t)(__prefix___num_elements(out) / states) * __prefix___element_bytes(out) : 0u;
}

/* stack_states(states..., reversed_0 .. reversed_{G-1}) -> out [L, G, ...]: out[t][g] is pass
 * g's state at position t, its step t (a reverse pass's step L - 1 - t). */
int32_t __prefix___builtin_stack_states(void* self, void* args, int32_t num_args, void* result) {
  const TVMFFIAny* any = (const TVMFFIAny*)args;
  DLTensor* out = __prefix___arg_tensor(args, num_args - 1);
  int64_t rows = out->shape[0], groups = out->shape[1], steps, t, g;
  size_t bytes;
  (void)self;
  (void)result;
  if (groups < 1 || num_args - 1 - groups < groups) return -1;
  steps = (num_args - 1 - groups) / groups;
  if (rows > steps) return -1;  /* the arena and the plan allow no more */
  bytes = __prefix___state_bytes(out, rows * groups);
  for (t = 0; t < rows; ++t) {
    for (g = 0; g < groups; ++g) {
      int64_t step = any[groups * steps + g].v_int64 ? rows - 1 - t : t;
      const DLTensor* state = __prefix___arg_tensor(args, (int)(g * steps + step));
      memcpy((unsigned char*)out->data + (size_t)(t * groups + g) * bytes, state->data, bytes);
    }
  }
  return 0;
}

/* last_states(states..., L) -> out [G, ...]: each pass's state after its step L - 1. */
int32_t __prefix___builtin_last_states(void* self, void* args, int32_t num_args, void* result) {
  const TVMFFIAny* any = (const TVMFFIAny*)args;
  DLTensor* out = __prefix___arg_tensor(args, num_args - 1);
  int64_t groups = out->shape[0], length = any[num_args - 2].v_int64, steps, g;
  size_t bytes = __prefix___state_bytes(out, groups);
  (void)self;
  (void)result;
  if (groups < 1) return -1;
  steps = (num_args - 2) / groups;
  if (length < 1 || length > steps) return -1;
  for (g = 0; g < groups; ++g) {
    const DLTensor* state = __prefix___arg_tensor(args, (int)(g * steps + length - 1));
    memcpy((unsigned char*)out->data + (size_t)g * bytes, state->data, bytes);
  }
  return 0;
}

#else
typedef int __prefix___no_builtins; /* ISO C: a translation unit declares something */
#endif
