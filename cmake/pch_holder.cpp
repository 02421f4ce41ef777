// The translation unit that owns the shared Torch precompiled header (cmake/HedgehogPch.cmake).
