package ui

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/global-controller/kubeconfigapi"
	"github.com/edgefleet/edgefleet/global-controller/problem"
	"github.com/edgefleet/edgefleet/pkg/kubeauth"
)

// campaignActions are the brakes of a campaign: the merge patch of its spec each one writes,
// the reason of the event recorded, and whether a campaign's spec is so already (the action
// would change nothing).
var campaignActions = map[string]struct {
	patch   string
	reason  string
	done    string
	already func(fleetv1.CampaignSpec) bool
}{
	"pause":  {patch: `{"spec":{"paused":true}}`, reason: "PausedFromUI", done: "paused", already: func(s fleetv1.CampaignSpec) bool { return s.Paused }},
	"resume": {patch: `{"spec":{"paused":false}}`, reason: "ResumedFromUI", done: "resumed", already: func(s fleetv1.CampaignSpec) bool { return !s.Paused }},
	"abort":  {patch: `{"spec":{"abort":true}}`, reason: "AbortedFromUI", done: "aborted", already: func(s fleetv1.CampaignSpec) bool { return s.Abort }},
}

// campaignAction pauses, resumes or aborts a campaign for a user RBAC lets patch it: the
// controller writes the patch with its own identity (the user's access was checked with a
// SubjectAccessReview first, as the API server would check it), records an event naming the
// user on the campaign, and sends the browser back to the campaign's page.
func (s *Server) campaignAction(c *gin.Context) {
	u := c.MustGet(userKey).(kubeauth.User)
	ns, name, action := c.Param("namespace"), c.Param("name"), c.Param("action")
	a, ok := campaignActions[action]
	if !ok {
		s.fail(c, &httpError{status: http.StatusNotFound, msg: fmt.Sprintf("no campaign action %q: pause, resume or abort", action)})
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.Limits.RequestTimeout)
	defer cancel()
	if err := s.authorize(ctx, u, fleetAccess("patch", "campaigns", ns, name)); err != nil {
		s.fail(c, err)
		return
	}
	camp := &fleetv1.Campaign{}
	if err := s.cfg.Cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, camp); err != nil {
		if apierrors.IsNotFound(err) {
			err = &httpError{status: http.StatusNotFound, msg: fmt.Sprintf("campaign %q not found in namespace %q", name, ns)}
		}
		s.fail(c, err)
		return
	}
	if camp.Status.Phase.Final() {
		s.fail(c, &httpError{status: http.StatusConflict, msg: fmt.Sprintf("campaign %s/%s has ended (%s): there is nothing to %s", ns, name, camp.Status.Phase, action)})
		return
	}
	// A campaign already so (a page left open, a form sent twice) is not changed, and no
	// event says it was: the browser goes back to its page.
	if !a.already(camp.Spec) {
		if err := s.cfg.Campaigns.Patch(ctx, camp, client.RawPatch(types.MergePatchType, []byte(a.patch))); err != nil {
			s.fail(c, fmt.Errorf("%s campaign %s/%s: %w", action, ns, name, err))
			return
		}
		s.cfg.Log.Info("campaign changed from the web UI", "campaign", ns+"/"+name, "action", action, "user", u.Name)
		s.cfg.Recorder.Eventf(camp, nil, corev1.EventTypeNormal, a.reason, "WebUI", "%s from the web UI by %s", a.done, u.Name)
	}
	c.Redirect(http.StatusSeeOther, objectURL("campaigns", ns, name))
}

// kubeconfig answers the site page's script (static/kubeconfig.js) with a credential of the
// site's application cluster for the signed-in user, from the CSR of a key made in the browser:
// the same checks as the REST endpoint (kubeconfigapi: a fresh SubjectAccessReview, the site's
// BPA signs, an Event on the Site), answered in its JSON.
func (s *Server) kubeconfig(c *gin.Context) {
	if s.cfg.Kubeconfigs == nil {
		c.JSON(http.StatusNotFound, restv1.Error{Message: "this server issues no kubeconfigs"})
		return
	}
	u := c.MustGet(userKey).(kubeauth.User)
	req, err := kubeconfigapi.Decode(c.Request.Body)
	var cred restv1.ClusterCredential
	if err == nil {
		cred, err = s.cfg.Kubeconfigs.Issue(c.Request.Context(), u, types.NamespacedName{Namespace: c.Param("namespace"), Name: c.Param("name")}, req)
	}
	c.Header("Cache-Control", "no-store")
	if err != nil {
		p := problem.Of(err)
		c.JSON(p.Status, restv1.Error{Message: p.Message, Field: p.Field})
		return
	}
	s.cfg.Log.Info("kubeconfig issued from the web UI", "site", c.Param("namespace")+"/"+c.Param("name"), "user", u.Name, "expires", cred.ExpirationTime)
	c.JSON(http.StatusOK, cred)
}
