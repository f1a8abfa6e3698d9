/*
 * moe.cl - the mixture-of-experts ops of ABI 1.4: MUL_MAT_ID, TOP_K and
 * SUM_ROWS (DIV is k_binary's, elementwise.cl).
 *
 * k_mul_mat_id: d[n, s, t] = sum_k w[k, n, e] * x[k, s % n_b, t], e = ids[s, t];
 * w [K, N, E] F32, F16, BF16 or a quantized type (rows of whole blocks), x
 * F32 [K, n_b, T], ids I32 [n_used, T], d F32 [N, n_used, T]. One work-group
 * of WG items per output element, as k_mul_mat's with one column: item lid
 * takes k-chunks lid, lid + WG, ... (32 elements for block types), partial
 * sums meet in local memory. An id outside 0..E-1 cannot be reported from a
 * kernel: that slot's row is written as 0 and nothing is read through it.
 * The straightforward version is ref_matmul.c (double sums); here f32.
 */
kernel void k_mul_mat_id(TENSOR(w), TENSOR(x), TENSOR(ids), TENSOR(d), int quant) {
    local float scratch[WG];
    const int lid = get_local_id(0);
    const long n = get_group_id(0), s = get_group_id(1), t = get_group_id(2);
    const long K = w_ne.s0, E = w_ne.s2;
    global uchar *out = BASE(d) + OFFSET(d, n, s, t, 0);
    const int e = *(const global int *)(BASE(ids) + OFFSET(ids, s, t, 0, 0));
    if (e < 0 || e >= E) {
        if (lid == 0) *(global float *)out = 0.0f;
        return;
    }
    const global uchar *wrow = BASE(w) + n * w_nb.s1 + e * w_nb.s2;
    const global uchar *xrow = BASE(x) + OFFSET(x, 0, s % x_ne.s1, t, 0);
    float acc = 0.0f;
    if (quant) {
        float wv[32];
        for (long c = lid; c < K / 32; c += WG) {
            dequant32(wrow, w_type, c, wv);
            const global uchar *xp = xrow + 32 * c * x_nb.s0;
            float sum = 0.0f;
            for (int i = 0; i < 32; i++) sum += wv[i] * *(const global float *)(xp + i * x_nb.s0);
            acc += sum;
        }
    } else {
        for (long k = lid; k < K; k += WG)
            acc += load_float(w_type, wrow + k * w_nb.s0) * *(const global float *)(xrow + k * x_nb.s0);
    }
    scratch[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = WG / 2; h > 0; h /= 2) {
        if (lid < h) scratch[lid] += scratch[lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) *(global float *)out = scratch[0];
}

/* TOP_K's order: x (at index i) ranks before y (at j): larger first, equal
 * values by lower index, NaN after every number. */
static inline int ranks_before(float x, long i, float y, long j) {
    if (isnan(x) || isnan(y)) return isnan(x) == isnan(y) ? i < j : isnan(y);
    return x > y || (x == y && i < j);
}

/* k_top_k: work-item (i0, i1, i2 + ne2 * i3) of a's shape counts how many
 * elements of its row rank before it; a rank below k writes d[rank] = i0, so
 * each element of d is written once (ranks are a permutation). */
kernel void k_top_k(TENSOR(a), TENSOR(d)) {
    const long i0 = get_global_id(0), i1 = get_global_id(1), i23 = get_global_id(2);
    const long i2 = i23 % a_ne.s2, i3 = i23 / a_ne.s2;
    if (i0 >= a_ne.s0 || i1 >= a_ne.s1 || i3 >= a_ne.s3) return;
    const global uchar *row = BASE(a) + OFFSET(a, 0, i1, i2, i3);
    const float x = *(const global float *)(row + i0 * a_nb.s0);
    long rank = 0;
    for (long j = 0; j < a_ne.s0; j++)
        rank += ranks_before(*(const global float *)(row + j * a_nb.s0), j, x, i0);
    if (rank < d_ne.s0) *(global int *)(BASE(d) + OFFSET(d, rank, i1, i2, i3)) = (int)i0;
}

/* k_sum_rows: one work-item per row, a compensated (Kahan) f32 sum in
 * index order (the program is built without fast-math options). */
kernel void k_sum_rows(TENSOR(a), TENSOR(d)) {
    const long i1 = get_global_id(1), i23 = get_global_id(2);
    const long i2 = i23 % a_ne.s2, i3 = i23 / a_ne.s2;
    if (get_global_id(0) != 0 || i1 >= a_ne.s1 || i3 >= a_ne.s3) return;
    const global uchar *row = BASE(a) + OFFSET(a, 0, i1, i2, i3);
    float sum = 0.0f, c = 0.0f;
    for (long k = 0; k < a_ne.s0; k++) {
        const float y = *(const global float *)(row + k * a_nb.s0) - c;
        const float t = sum + y;
        c = (t - sum) - y;
        sum = t;
    }
    *(global float *)(BASE(d) + OFFSET(d, 0, i1, i2, i3)) = sum;
}

/*
 * MUL_MAT_ID grouped by expert, for prompts (ocl_ops.c: op_mul_mat_id):
 * k_mul_mat_id (above) reads an expert's weights once per (token, slot)
 * that chose it; these two kernels read them once per MOE_TN of its pairs.
 *
 * k_moe_group, one work-group: lists each expert's (token, slot) pairs in
 * the queue's scratch buffer, as words
 *     offs[0..E]              expert e's pairs are list[offs[e] .. offs[e+1])
 *     list[pairs]             pair p = t * n_used + s (at word E + 1)
 *     n_tiles, tiles[2 n]     after the list: (e, first list index) of each
 *                             tile of MOE_TN pairs of one expert
 * counting with local atomics, then (item 0) the prefix sums and the tile
 * table, then each pair placed at its expert's next free slot. The order
 * of an expert's pairs is whatever the atomics give: each output below is
 * one weight row dotted with one column, k in order, wherever that column
 * sits in its tile, so no result depends on it. A pair whose id is outside
 * 0..E-1 is in no list: its dst row is written as 0 here, as k_mul_mat_id
 * writes it.
 *
 * k_mul_mat_id_tiled, work-groups of 64 items over (row tile of MOE_TM
 * weight rows, tile): the tile's expert's MOE_TM rows times its up to
 * MOE_TN pairs' activations as a small GEMM, 32 k at a time through local
 * memory (items 0..31 dequantize a row's 32 weights, items 32..63 read a
 * pair's 32 activations), each item 4 rows x 4 pairs; outputs stored at the
 * pair's (slot, token). Tile slots past n_tiles return at once: the grid is
 * sized for pairs / MOE_TN + E tiles, the most there can be.
 * The straightforward version: k_mul_mat_id and ref_matmul.c.
 */
#define MOE_MAX_E 1024 /* OCL_MOE_MAX_EXPERTS */
#define MOE_TM 32      /* weight rows per tile */
#define MOE_TN 32      /* pairs per tile */

kernel void k_moe_group(TENSOR(ids), TENSOR(d), global uint *lists, long E) {
    local uint cnt[MOE_MAX_E];
    const long lid = get_local_id(0), wg = get_local_size(0);
    const long n_used = ids_ne.s0, pairs = n_used * ids_ne.s1, N = d_ne.s0;
    for (long e = lid; e < E; e += wg) cnt[e] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (long p = lid; p < pairs; p += wg) {
        const int e = *(const global int *)(BASE(ids) + OFFSET(ids, p % n_used, p / n_used, 0, 0));
        if (e >= 0 && e < E) atomic_inc(&cnt[e]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        global uint *tiles = lists + E + 1 + pairs;
        uint run = 0, n_tiles = 0;
        for (long e = 0; e < E; e++) {
            const uint c = cnt[e];
            lists[e] = run;
            for (uint f = 0; f < c; f += MOE_TN, n_tiles++) {
                tiles[1 + 2 * n_tiles] = (uint)e;
                tiles[2 + 2 * n_tiles] = run + f;
            }
            cnt[e] = run; /* now the next free slot */
            run += c;
        }
        lists[E] = run;
        tiles[0] = n_tiles;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (long p = lid; p < pairs; p += wg) {
        const long s = p % n_used, t = p / n_used;
        const int e = *(const global int *)(BASE(ids) + OFFSET(ids, s, t, 0, 0));
        if (e >= 0 && e < E) {
            lists[E + 1 + atomic_inc(&cnt[e])] = (uint)p;
        } else {
            for (long n = 0; n < N; n++) *(global float *)(BASE(d) + OFFSET(d, n, s, t, 0)) = 0.0f;
        }
    }
}

kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void k_mul_mat_id_tiled(TENSOR(w), TENSOR(x), TENSOR(d), const global uint *lists, long E, int quant) {
    local float ws[MOE_TM][33]; /* weights: row, k (one column of padding) */
    local float xs[MOE_TN][33]; /* activations: pair, k */
    const int lid = get_local_id(0);
    const long N = d_ne.s0, n_used = d_ne.s1, pairs = n_used * d_ne.s2, K = w_ne.s0;
    const global uint *tiles = lists + E + 1 + pairs;
    const long tile = get_group_id(1);
    if (tile >= tiles[0]) return; /* the whole work-group */
    const uint e = tiles[1 + 2 * tile], first = tiles[2 + 2 * tile];
    const int cnt = (int)min((uint)MOE_TN, lists[e + 1] - first);
    const global uint *plist = lists + E + 1 + first;
    const long m0 = get_group_id(0) * MOE_TM;
    const global uchar *wexp = BASE(w) + e * w_nb.s2;
    /* the pair this item loads (items MOE_TM..63) */
    const int c_load = lid - MOE_TM;
    const global uchar *xrow = BASE(x);
    if (c_load >= 0 && c_load < cnt) {
        const uint p = plist[c_load];
        xrow += OFFSET(x, 0, (p % n_used) % x_ne.s1, p / n_used, 0);
    }
    const int r0 = lid % 8, c0 = lid / 8; /* rows r0 + 8i, pairs c0 + 8j */
    float acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
    for (long k0 = 0; k0 < K; k0 += 32) {
        float v[32];
        if (lid < MOE_TM) {
            const long m = m0 + lid;
            const global uchar *wrow = wexp + m * w_nb.s1;
            if (m >= N)
                for (int j = 0; j < 32; j++) v[j] = 0.0f;
            else if (quant)
                dequant32(wrow, w_type, k0 / 32, v);
            else
                for (int j = 0; j < 32; j++) v[j] = k0 + j < K ? load_float(w_type, wrow + (k0 + j) * w_nb.s0) : 0.0f;
            for (int j = 0; j < 32; j++) ws[lid][j] = v[j];
        } else {
            for (int j = 0; j < 32; j++)
                xs[c_load][j] = c_load < cnt && k0 + j < K ? *(const global float *)(xrow + (k0 + j) * x_nb.s0) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < 32; kk++)
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) acc[i][j] += ws[r0 + 8 * i][kk] * xs[c0 + 8 * j][kk];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int j = 0; j < 4; j++) {
        const int c = c0 + 8 * j;
        if (c >= cnt) continue;
        const uint p = plist[c];
        for (int i = 0; i < 4; i++) {
            const long m = m0 + r0 + 8 * i;
            if (m < N) *(global float *)(BASE(d) + OFFSET(d, m, p % n_used, p / n_used, 0)) = acc[i][j];
        }
    }
}
