"""A STAND-IN written for fp8check's tests (not any project's code): a two-call K store in the shape of
SGLang's (quantize to (values, scales), then store both into `buf[num_pages, page_size * (D + 4)]` by
slot), in plain torch, so a composed preset runs offline."""

import torch


def quantize(x, group, scale_fmt):
    xf = x.float().view(x.shape[0], -1, group)
    s = xf.abs().amax(-1, keepdim=True).clamp(min=1e-4) / 448.0
    if scale_fmt is not None:
        s = torch.exp2(torch.ceil(torch.log2(s)))
    y = (xf / s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(x.shape)
    return y, s.view(x.shape[0], -1)


def store(buf, loc, index_k, index_k_scale, page_size):
    pages, head_dim = buf.shape[0], index_k.shape[1]
    page, token = loc // page_size, loc % page_size
    values = buf[:, : page_size * head_dim].view(pages, page_size, head_dim)
    values[page, token] = index_k.view(torch.uint8)
    scale_at = page_size * head_dim + 4 * token.view(-1, 1) + torch.arange(4, device=buf.device)
    buf[page.view(-1, 1), scale_at] = index_k_scale.contiguous().view(torch.uint8).view(-1, 4)
