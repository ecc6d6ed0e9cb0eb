// Writes cmyk.jpg: a 256x256 CMYK (YCCK-coded, Adobe APP14) JPEG, as Photoshop print exports are.
#include <turbojpeg.h>
#include <stdio.h>
#include <stdlib.h>
int main(void) {
  int w = 256, h = 256; unsigned char *px = malloc(w * h * 4);
  for (int i = 0; i < w * h; i++) { px[4*i] = i % 256; px[4*i+1] = (i / 256) % 256; px[4*i+2] = 64; px[4*i+3] = 0; }
  tjhandle c = tjInitCompress(); unsigned char *out = NULL; unsigned long size = 0;
  if (tjCompress2(c, px, w, w * 4, h, TJPF_CMYK, &out, &size, TJSAMP_444, 90, 0)) { printf("%s\n", tjGetErrorStr2(c)); return 1; }
  FILE *f = fopen("cmyk.jpg", "wb"); fwrite(out, 1, size, f); fclose(f); printf("cmyk.jpg %lu bytes\n", size); return 0;
}
