"""The inline-asm rewrite of staged HIP sources (fp8check/hip_cpu/asm_rewrite.py)."""

from __future__ import annotations

from fp8check.hip_cpu.asm_rewrite import rewrite


def test_operands_become_outputs_and_inputs_in_gcc_numbering_with_names():
    text = 'asm volatile("v_max3_f32 %0, %1, %2, %3" : "=v"(amax) : "v"(amax), [b] "v"(f(x[i])), "v"(y));\n'
    out, count = rewrite(text)
    assert count == 1
    assert out == ('{ ::hipcpu::isa::AsmOperand hipcpu_asm_ops_[] = {::hipcpu::isa::output("=v", nullptr, (amax)),'
                   ' ::hipcpu::isa::input("v", nullptr, (amax)), ::hipcpu::isa::input("v", "b", (f(x[i]))),'
                   ' ::hipcpu::isa::input("v", nullptr, (y))}; hipcpu_run_asm("v_max3_f32 %0, %1, %2, %3",'
                   ' hipcpu_asm_ops_, 4); }\n')


def test_a_statement_over_several_lines_keeps_the_line_count_and_macro_continuations():
    plain = 'asm volatile("v_med3_f32 %1, %1, %3, %4\\n"\n  "v_cvt_pk_fp8_f32 %0, %1, %2"\n  : "=v"(w), "+v"(a)\n  : "v"(lo), "v"(hi));\nint z;\n'
    out, _ = rewrite(plain)
    assert out.count("\n") == plain.count("\n") and out.endswith("\nint z;\n")
    assert 'hipcpu_run_asm("v_med3_f32 %1, %1, %3, %4\\n" "v_cvt_pk_fp8_f32 %0, %1, %2", hipcpu_asm_ops_, 4)' in out
    in_macro = '#define CVT(w, a) \\\n  asm volatile("v_x %0, %1" \\\n  : "=v"(w) : "v"(a))\nint z;\n'
    out, _ = rewrite(in_macro)
    assert out.startswith("#define CVT(w, a) \\\n  { ::hipcpu::isa::AsmOperand")
    assert 'hipcpu_run_asm("v_x %0, %1", hipcpu_asm_ops_, 2); } \\\n\nint z;\n' in out


def test_identifiers_that_contain_asm_and_label_asm_are_left_alone():
    text = 'int my_asm_count = 0; void f() __asm("llvm.amdgcn.x"); asm("s_nop 0");\n'
    out, count = rewrite(text)
    assert (out, count) == (text, 0)
