// Build probe: does glslc compile GL_EXT_bfloat16? (meson.build)
#version 450
#extension GL_EXT_bfloat16 : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
layout(local_size_x = 32) in;
layout(std430, binding = 0) buffer B { bfloat16_t d[]; } b;
layout(std430, binding = 1) buffer C { float d[]; } c;
void main() { c.d[0] = float(b.d[0]); }
