// Build probe: does glslc compile GL_KHR_cooperative_matrix? (meson.build)
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 32) in;
layout(std430, binding = 0) buffer A { float16_t d[]; } a;
layout(std430, binding = 1) buffer C { float d[]; } c;
void main() {
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> ma;
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> mb;
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc =
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    coopMatLoad(ma, a.d, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(mb, a.d, 256, 16, gl_CooperativeMatrixLayoutColumnMajor);
    acc = coopMatMulAdd(ma, mb, acc);
    coopMatStore(acc, c.d, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
}
