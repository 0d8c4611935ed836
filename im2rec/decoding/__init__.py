"""Image decoding beyond Pillow: :mod:`.jpeg` decodes only the region of a
JPEG a crop keeps, through the optional C extension ``_jpeg`` (libjpeg-turbo)."""
