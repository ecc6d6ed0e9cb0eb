// Gzip lives in the Zlib module (the places file uses it too); code that compresses responses
// through HTTPServer keeps seeing it.
@_exported import Zlib
