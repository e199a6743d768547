/* ksdist datagen: drawing characters with this machine's fonts (datagen-glyphs.c), for
 * the glyph sets and the digits. Only where FreeType and fontconfig were found. */
#ifndef KS_DATAGEN_FONTS_H
#define KS_DATAGEN_FONTS_H

#include "datagen.h"

#include <fontconfig/fontconfig.h>
#include <ft2build.h>
#include FT_FREETYPE_H

enum { CANVAS = 105 }; /* the side of a drawn character, Omniglot's */

typedef struct {
  char *file;
  int index;
  FcCharSet *charset; /* owned */
} Font;

/* Every scalable font fontconfig knows, sorted by file and face (a fixed order). */
GArray *list_fonts (void);
void fonts_clear (GArray *fonts);
/* Whether the glyph of c in `face` has ink (not a blank or a missing glyph). */
gboolean has_ink (FT_Face face, gunichar c);
/* c in `face` under a random affine map and stroke drawn from r, on a white CANVAS x
 * CANVAS grey image (0 ink, 255 paper). */
gboolean draw_glyph (FT_Face face, gunichar c, Rng *r, guint8 *canvas);

#endif
