/* Test helper: writes a JPEG with any sampling factors libjpeg accepts, which
 * Pillow cannot (it writes 4:4:4, 4:2:2 and 4:2:0 only). Compiled by the
 * sampled_jpeg fixture in tests/imaging/test_native_safety.py.
 *
 *   sampled_jpeg WIDTH HEIGHT COMPONENTS QUALITY FACTORS PROGRESSIVE < pixels > jpeg
 *
 * FACTORS: one HxV per component, comma-separated ("2x4,1x1,1x1");
 * pixels: WIDTH*HEIGHT*COMPONENTS bytes (gray or RGB). Exit 2 when libjpeg
 * refuses the factors (its message on stderr).
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h>

static jmp_buf failed;

static void on_error(j_common_ptr cinfo) {
    (*cinfo->err->output_message)(cinfo);
    longjmp(failed, 1);
}

int main(int argc, char **argv) {
    if (argc != 7) return 64;
    int width = atoi(argv[1]), height = atoi(argv[2]), comps = atoi(argv[3]);
    int quality = atoi(argv[4]), progressive = atoi(argv[6]);
    if (width <= 0 || height <= 0 || width > 4096 || height > 4096 || (comps != 1 && comps != 3))
        return 64;
    size_t size = (size_t)width * (size_t)height * (size_t)comps;
    unsigned char *pixels = malloc(size);
    if (pixels == NULL || fread(pixels, 1, size, stdin) != size) return 65;
    int h[3], v[3];
    const char *p = argv[5];
    for (int c = 0; c < comps; c++) {
        int used = 0;
        if (sscanf(p, "%dx%d%n", &h[c], &v[c], &used) != 2) return 64;
        p += used;
        if (*p == ',') p++;
    }
    struct jpeg_compress_struct cinfo;
    struct jpeg_error_mgr err;
    unsigned char *out = NULL;
    unsigned long out_size = 0;
    cinfo.err = jpeg_std_error(&err);
    err.error_exit = on_error;
    if (setjmp(failed)) return 2;
    jpeg_create_compress(&cinfo);
    jpeg_mem_dest(&cinfo, &out, &out_size);
    cinfo.image_width = (JDIMENSION)width;
    cinfo.image_height = (JDIMENSION)height;
    cinfo.input_components = comps;
    cinfo.in_color_space = comps == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&cinfo);
    jpeg_set_quality(&cinfo, quality, TRUE);
    for (int c = 0; c < comps; c++) {
        cinfo.comp_info[c].h_samp_factor = h[c];
        cinfo.comp_info[c].v_samp_factor = v[c];
    }
    if (progressive) jpeg_simple_progression(&cinfo);
    jpeg_start_compress(&cinfo, TRUE);
    while (cinfo.next_scanline < cinfo.image_height) {
        JSAMPROW row = pixels + (size_t)cinfo.next_scanline * (size_t)width * (size_t)comps;
        jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
    fwrite(out, 1, out_size, stdout);
    jpeg_destroy_compress(&cinfo);
    free(out);
    free(pixels);
    return 0;
}
