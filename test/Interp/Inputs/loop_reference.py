"""PyTorch f64 references for the loop and take tests of this directory
(loop-rnn.grad, loop-rk4.grad, take-gmm.grad): run with /usr/bin/python3 to
print the value and gradients that their EXPECT lines hold. Not run by lit."""

import torch
torch.set_default_dtype(torch.float64)
def rnn():
    xs=torch.tensor([[[1, 2]], [[0.5, -1]], [[0.3, 0.2]]]); h=torch.tensor([[0.1,-0.2]])
    w=torch.tensor([[0.3, -0.1], [0.2, 0.4]],requires_grad=True); u=torch.tensor([[0.5, 0.1], [-0.3, 0.2]],requires_grad=True)
    for i in range(3): h=torch.tanh(xs[i]@w+h@u)
    l=(h*h).sum(); l.backward(); return [l.item(), w.grad, u.grad]
def rk4():
    x0=torch.tensor([1.,0.],requires_grad=True); p=torch.tensor([2.,0.3],requires_grad=True); dt=0.1
    f=lambda x: torch.stack([x[1], -p[0]*torch.sin(x[0])-p[1]*x[1]])
    x=x0; fs=[]
    for t in range(20):
        k1=f(x); k2=f(x+0.5*dt*k1); k3=f(x+0.5*dt*k2); k4=f(x+dt*k3)
        x=x+dt/6.0*(k1+2*k2+2*k3+k4); fs.append(x[0])
    fs=torch.stack(fs); l=(x*x).sum()+0.1*(fs*fs).sum(); l.backward(); return [l.item(), x0.grad, p.grad]
def gmm():
    x=torch.tensor([[0.5, -1, 2], [1, 0.2, -0.3], [-1, 1, 0.7], [0.1, 0.1, 0.1]])
    alphas=torch.tensor([0.1,-0.4],requires_grad=True); means=torch.tensor([[0.2, -0.5, 1], [-1, 0.3, 0.4]],requires_grad=True)
    icf=torch.tensor([[0.1, -0.2, 0.3], [0.05, 0.2, -0.1]],requires_grad=True)
    lp=torch.tensor([[0.3, -0.7, 0.2, 0.9], [0.5, 0.1, -0.4, 0.6]],requires_grad=True)
    tri=torch.tensor([[0, 0, 0], [1, 0, 0], [2, 3, 0]]); mask=torch.tensor([[0., 0, 0], [1, 0, 0], [1, 1, 0]])
    l=lp[:, tri]*mask
    q=torch.diag_embed(torch.exp(icf))+l
    diff=x[:,None,:,None]-means[:,:,None]
    sq=((q@diff)**2).sum(dim=(2,3))
    logw=torch.log_softmax(alphas,0)+icf.sum(1)
    loss=-torch.logsumexp(logw-0.5*sq,dim=1).sum(); loss.backward()
    return [loss.item(), alphas.grad, means.grad, icf.grad, lp.grad]
for name,f in [("rnn",rnn),("rk4",rk4),("gmm",gmm)]:
    print(name)
    for v in f():
        print(repr(v) if isinstance(v,float) else v.tolist())
