// Build probe: does glslc compile GL_EXT_integer_dot_product? (meson.build)
#version 450
#extension GL_EXT_integer_dot_product : require
layout(local_size_x = 32) in;
layout(std430, binding = 0) buffer B { int d[]; } b;
void main() { b.d[0] = dotPacked4x8AccSatEXT(b.d[1], b.d[2], b.d[3]); }
