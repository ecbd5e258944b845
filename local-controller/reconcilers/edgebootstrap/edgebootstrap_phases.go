package edgebootstrap

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/conditions"
)

// Reasons of the EdgeBootstrapConfig Ready condition.
const (
	reasonJoining = "Joining"
	reasonJoined  = "Joined"
	reasonFailed  = "JoinFailed"
)

// reconcileData writes the machine's first-boot data Secret once, and names it in status.
func (r *Reconciler) reconcileData(ctx context.Context, cluster *clusterv1.Cluster, machine *clusterv1.Machine, cfg *sitev1.EdgeBootstrapConfig) error {
	if cfg.Status.DataSecretName != nil {
		return nil
	}
	data, err := r.Bootstrapper.UserData(ctx, cluster, machine)
	if err != nil {
		return fmt.Errorf("first-boot data of machine %s: %w", client.ObjectKeyFromObject(machine), err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster.Name}},
		Type: clusterv1.ClusterSecretType,
		Data: map[string][]byte{"value": data, "format": []byte("cloud-config")},
	}
	if err := controllerutil.SetControllerReference(cfg, secret, r.Client.Scheme()); err != nil {
		return err
	}
	// A Secret left by a reconcile that stopped before its status patch is taken as it is.
	if err := r.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create first-boot data Secret %s: %w", client.ObjectKeyFromObject(secret), err)
	}
	cfg.Status.DataSecretName = ptr.To(secret.Name)
	cfg.Status.Initialization.DataSecretCreated = ptr.To(true)
	return nil
}

// reconcileJoin asks the Bootstrapper to make the provisioned host a node.
func (r *Reconciler) reconcileJoin(ctx context.Context, cluster *clusterv1.Cluster, machine *clusterv1.Machine, cfg *sitev1.EdgeBootstrapConfig) (ctrl.Result, error) {
	if cfg.Status.Joined {
		return ctrl.Result{}, nil
	}
	if machine.Spec.ProviderID == "" {
		conditions.Set(&cfg.Status.Conditions, cfg.Generation, "Ready", metav1.ConditionFalse, reasonJoining,
			"first-boot data ready; waiting for the host to be provisioned")
		return ctrl.Result{}, nil // the Machine's update brings us back
	}
	joined, err := r.Bootstrapper.Join(ctx, cluster, machine)
	if err != nil {
		conditions.Set(&cfg.Status.Conditions, cfg.Generation, "Ready", metav1.ConditionFalse, reasonFailed, err.Error())
		return ctrl.Result{RequeueAfter: r.JoinRetry}, nil
	}
	if !joined {
		conditions.Set(&cfg.Status.Conditions, cfg.Generation, "Ready", metav1.ConditionFalse, reasonJoining,
			"host provisioned; waiting for its node to register")
		return ctrl.Result{RequeueAfter: r.JoinRetry}, nil
	}
	cfg.Status.Joined = true
	conditions.Set(&cfg.Status.Conditions, cfg.Generation, "Ready", metav1.ConditionTrue, reasonJoined,
		fmt.Sprintf("node %s registered", NodeName(machine)))
	return ctrl.Result{}, nil
}
