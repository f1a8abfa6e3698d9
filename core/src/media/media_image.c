/*
 * media_image: JPEG (libjpeg-turbo), PNG (libpng), WebP (libwebp), BMP and
 * the first frame of a GIF (stb_image) to packed RGB8.
 *
 * Each decoder checks the dimensions in the header against the limits
 * before allocating, and treats every warning (libjpeg's "premature end of
 * data", which it would otherwise paint over in grey) as the error it is.
 */
#include "media/media.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "media/media_config.h"
#include "util/error.h"

#if TSR_HAVE_LIBJPEG
#include <jpeglib.h>
#endif
#if TSR_HAVE_LIBPNG
#include <png.h>
#endif
#if TSR_HAVE_LIBWEBP
#include <webp/decode.h>
#endif
#if TSR_HAVE_STB
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_BMP
#define STBI_ONLY_GIF
#define STBI_NO_STDIO
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#define STBI_MAX_DIMENSIONS 65536
#define STBI_FAILURE_USERMSG
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#endif
#include <stb_image.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#endif

static inline int check_dims(const char *label, const char *fmt, int64_t nx, int64_t ny,
                      const media_limits *l) {
    if (nx <= 0 || ny <= 0)
        return error_set("%s: %s header: empty image (%lldx%lld)", label, fmt, (long long)nx,
                         (long long)ny);
    if (nx > l->max_side || ny > l->max_side || nx * ny > l->max_pixels)
        return error_set("%s: %s header: %lldx%lld is over the limit (%d per side, %lld pixels)",
                         label, fmt, (long long)nx, (long long)ny, l->max_side,
                         (long long)l->max_pixels);
    return 0;
}

static inline uint8_t *alloc_rgb(const char *label, int64_t nx, int64_t ny) {
    uint8_t *p = malloc((size_t)(nx * ny * 3));
    if (!p) error_set("%s: out of memory for %lldx%lld pixels", label, (long long)nx, (long long)ny);
    return p;
}

/* ------------------------------------------------------------------ JPEG */
#if TSR_HAVE_LIBJPEG
typedef struct jpeg_fail {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
} jpeg_fail;

static void jpeg_on_error(j_common_ptr c) {
    jpeg_fail *f = (jpeg_fail *)c->err;
    (*c->err->format_message)(c, f->msg);
    longjmp(f->jump, 1);
}

/* Warnings (level -1) are corrupt or truncated data: stop there. */
static void jpeg_on_message(j_common_ptr c, int level) {
    if (level < 0) jpeg_on_error(c);
}

static int decode_jpeg(const uint8_t *data, size_t size, const char *label, const media_limits *l,
                       media_image *out) {
    struct jpeg_decompress_struct d;
    jpeg_fail fail;
    uint8_t *volatile rgb = NULL;
    memset(&d, 0, sizeof d);
    d.err = jpeg_std_error(&fail.mgr);
    fail.mgr.error_exit = jpeg_on_error;
    fail.mgr.emit_message = jpeg_on_message;
    if (setjmp(fail.jump)) {
        jpeg_destroy_decompress(&d);
        free(rgb);
        return error_set("%s: jpeg data: %s", label, fail.msg);
    }
    jpeg_create_decompress(&d);
    if (size > (size_t)~0UL) size = ~0UL;
    jpeg_mem_src(&d, data, (unsigned long)size);
    jpeg_read_header(&d, TRUE);
    if (check_dims(label, "jpeg", d.image_width, d.image_height, l) != 0) {
        jpeg_destroy_decompress(&d);
        return -1;
    }
    if (d.jpeg_color_space == JCS_CMYK || d.jpeg_color_space == JCS_YCCK) {
        jpeg_destroy_decompress(&d);
        return error_set("%s: jpeg header: CMYK images are not supported", label);
    }
    d.out_color_space = JCS_RGB;
    jpeg_start_decompress(&d);
    if (d.output_components != 3) {
        jpeg_destroy_decompress(&d);
        return error_set("%s: jpeg header: %d components after conversion to RGB", label,
                         d.output_components);
    }
    int64_t nx = d.output_width, ny = d.output_height;
    rgb = alloc_rgb(label, nx, ny);
    if (!rgb) {
        jpeg_destroy_decompress(&d);
        return -1;
    }
    while (d.output_scanline < d.output_height) {
        JSAMPROW row = rgb + (size_t)d.output_scanline * (size_t)nx * 3;
        jpeg_read_scanlines(&d, &row, 1);
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    out->nx = (int32_t)nx;
    out->ny = (int32_t)ny;
    out->rgb = rgb;
    return 0;
}
#endif

/* ------------------------------------------------------------------- PNG */
#if TSR_HAVE_LIBPNG
typedef struct png_src {
    const uint8_t *p;
    size_t n, at;
    char msg[160];
} png_src;

static void png_on_read(png_structp png, png_bytep dst, size_t n) {
    png_src *s = png_get_io_ptr(png);
    if (n > s->n - s->at) {
        snprintf(s->msg, sizeof s->msg, "truncated at byte %zu (wanted %zu more)", s->n, n);
        png_longjmp(png, 1);
    }
    memcpy(dst, s->p + s->at, n);
    s->at += n;
}

static void png_on_error(png_structp png, png_const_charp msg) {
    png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg; /* benign (an unknown chunk, a bad gamma): the pixels stand */
}

static int decode_png(const uint8_t *data, size_t size, const char *label, const media_limits *l,
                      media_image *out) {
    png_src src = {data, size, 0, "unknown error"};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error,
                                             png_on_warning);
    if (!png) return error_set("%s: png: out of memory", label);
    png_infop info = png_create_info_struct(png);
    uint8_t *volatile rgb = NULL;
    png_bytep *volatile rows = NULL;
    if (!info || setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, info ? &info : NULL, NULL);
        free(rgb);
        free(rows);
        return error_set("%s: png data: %s", label, src.msg);
    }
    png_set_read_fn(png, &src, png_on_read);
    png_set_chunk_malloc_max(png, 64u << 20);
    png_read_info(png, info);
    png_uint_32 nx = png_get_image_width(png, info), ny = png_get_image_height(png, info);
    if (check_dims(label, "png", nx, ny, l) != 0) {
        png_destroy_read_struct(&png, &info, NULL);
        return -1;
    }
    int color = png_get_color_type(png, info);
    png_set_expand(png);      /* palette, low-bit grey, tRNS -> 8-bit */
    png_set_strip_16(png);
    png_set_strip_alpha(png); /* dropped, as llama.cpp's loader does */
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA)
        png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != (size_t)nx * 3)
        png_error(png, "unexpected row size after conversion to RGB");
    rgb = alloc_rgb(label, nx, ny);
    rows = malloc(sizeof(png_bytep) * ny);
    if (!rgb || !rows) png_error(png, "out of memory");
    for (png_uint_32 y = 0; y < ny; y++) rows[y] = rgb + (size_t)y * nx * 3;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    out->nx = (int32_t)nx;
    out->ny = (int32_t)ny;
    out->rgb = rgb;
    return 0;
}
#endif

/* ------------------------------------------------------------------ WebP */
#if TSR_HAVE_LIBWEBP
static int decode_webp(const uint8_t *data, size_t size, const char *label, const media_limits *l,
                       media_image *out) {
    WebPBitstreamFeatures ft;
    VP8StatusCode st = WebPGetFeatures(data, size, &ft);
    if (st != VP8_STATUS_OK)
        return error_set("%s: webp header: %s", label,
                         st == VP8_STATUS_NOT_ENOUGH_DATA ? "truncated" : "invalid");
    if (ft.has_animation) return error_set("%s: webp: animated WebP is not supported", label);
    if (check_dims(label, "webp", ft.width, ft.height, l) != 0) return -1;
    int64_t nx = ft.width, ny = ft.height;
    uint8_t *rgb = alloc_rgb(label, nx, ny);
    if (!rgb) return -1;
    if (!WebPDecodeRGBInto(data, size, rgb, (size_t)(nx * ny * 3), (int)(nx * 3))) {
        free(rgb);
        return error_set("%s: webp data: truncated or corrupt", label);
    }
    out->nx = (int32_t)nx;
    out->ny = (int32_t)ny;
    out->rgb = rgb;
    return 0;
}
#endif

/* -------------------------------------------------------------- BMP, GIF */
#if TSR_HAVE_STB
static uint32_t rd_le(const uint8_t *p, int n) {
    uint32_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* stb_image fills a short file's missing pixels with zeros: check that an
 * uncompressed BMP holds every row its header promises. */
static int check_bmp(const uint8_t *p, size_t n, const char *label) {
    if (n < 54) return error_set("%s: bmp header: truncated (%zu bytes)", label, n);
    uint32_t off = rd_le(p + 10, 4), hsize = rd_le(p + 14, 4);
    if (hsize < 40) return 0; /* OS/2 core header: let stb judge */
    int32_t w = (int32_t)rd_le(p + 18, 4), h = (int32_t)rd_le(p + 22, 4);
    uint32_t bpp = rd_le(p + 28, 2), comp = rd_le(p + 30, 4);
    if (comp != 0 && comp != 3) return 0; /* RLE: stb checks as it goes */
    if (w <= 0 || h == 0 || h == INT32_MIN || bpp == 0 || bpp > 32)
        return error_set("%s: bmp header: %d x %d at %u bits", label, w, h, bpp);
    uint64_t row = ((uint64_t)w * bpp + 31) / 32 * 4;
    uint64_t need = (uint64_t)off + row * (uint64_t)(h < 0 ? -(int64_t)h : h);
    if (need > n)
        return error_set("%s: bmp data: truncated: the header promises %llu bytes, the file "
                         "holds %zu", label, (unsigned long long)need, n);
    return 0;
}

/* stb_image decodes a GIF cut inside its picture data as if it were whole:
 * walk the blocks up to the end of the first frame's data. */
static int check_gif(const uint8_t *p, size_t n, const char *label) {
    size_t at = 13;
    if (n < at) return error_set("%s: gif header: truncated", label);
    if (p[10] & 0x80) at += (size_t)3 << ((p[10] & 7) + 1);
    for (;;) {
        if (at >= n) return error_set("%s: gif data: truncated before the first frame", label);
        uint8_t b = p[at++];
        if (b == 0x21) { /* extension: label, then sub-blocks */
            at++;
            for (;;) {
                if (at >= n) return error_set("%s: gif data: truncated in an extension", label);
                uint8_t len = p[at++];
                if (!len) break;
                at += len;
            }
        } else if (b == 0x2C) { /* image descriptor */
            if (at + 9 > n) return error_set("%s: gif data: truncated frame header", label);
            uint8_t flags = p[at + 8];
            at += 9;
            if (flags & 0x80) at += (size_t)3 << ((flags & 7) + 1);
            at++; /* LZW minimum code size */
            for (;;) {
                if (at >= n) return error_set("%s: gif data: truncated in the first frame", label);
                uint8_t len = p[at++];
                if (!len) return 0;
                at += len;
            }
        } else {
            return error_set("%s: gif data: unknown block 0x%02x at byte %zu", label, b, at - 1);
        }
    }
}

static int decode_stb(const uint8_t *data, size_t size, const char *label, const char *fmt,
                      const media_limits *l, media_image *out) {
    if (size > 0x7fffffff) return error_set("%s: %s: larger than 2 GiB", label, fmt);
    if (!strcmp(fmt, "bmp") ? check_bmp(data, size, label) : check_gif(data, size, label))
        return -1;
    int nx, ny, comp;
    if (!stbi_info_from_memory(data, (int)size, &nx, &ny, &comp))
        return error_set("%s: %s header: %s", label, fmt, stbi_failure_reason());
    if (check_dims(label, fmt, nx, ny, l) != 0) return -1;
    uint8_t *px = stbi_load_from_memory(data, (int)size, &nx, &ny, &comp, 3);
    if (!px) return error_set("%s: %s data: %s", label, fmt, stbi_failure_reason());
    if (check_dims(label, fmt, nx, ny, l) != 0) {
        stbi_image_free(px);
        return -1;
    }
    /* one allocator for every decoder's pixels: copy out of stb's */
    uint8_t *rgb = alloc_rgb(label, nx, ny);
    if (rgb) memcpy(rgb, px, (size_t)nx * ny * 3);
    stbi_image_free(px);
    if (!rgb) return -1;
    out->nx = nx;
    out->ny = ny;
    out->rgb = rgb;
    return 0;
}
#endif

int media_image_decode(const void *data, size_t size, const char *label,
                       const media_limits *limits, media_image *out) {
    media_limits l = limits ? *limits : media_limits_default();
    (void)l; /* unused in a build without any image library */
    memset(out, 0, sizeof *out);
    if (!label) label = "image";
    const char *fmt = NULL;
    media_kind k = media_sniff(data, size, &fmt);
    if (k != MEDIA_IMAGE) {
        if (k == MEDIA_AUDIO) return error_set("%s: is a sound (%s), not an image", label, fmt);
        return error_set("%s: not an image this build can read (formats: %s)", label,
                         media_formats());
    }
    const char *missing = NULL;
    if (!strcmp(fmt, "jpeg")) {
#if TSR_HAVE_LIBJPEG
        return decode_jpeg(data, size, label, &l, out);
#else
        missing = "libjpeg";
#endif
    } else if (!strcmp(fmt, "png")) {
#if TSR_HAVE_LIBPNG
        return decode_png(data, size, label, &l, out);
#else
        missing = "libpng";
#endif
    } else if (!strcmp(fmt, "webp")) {
#if TSR_HAVE_LIBWEBP
        return decode_webp(data, size, label, &l, out);
#else
        missing = "libwebp";
#endif
    } else {
#if TSR_HAVE_STB
        return decode_stb(data, size, label, fmt, &l, out);
#else
        missing = "stb_image (libstb-dev)";
#endif
    }
    return error_set("%s: %s images need %s, which this build was made without", label, fmt,
                     missing);
}

void media_image_free(media_image *img) {
    if (!img) return;
    free(img->rgb);
    img->rgb = NULL;
    img->nx = img->ny = 0;
}
